"""The store's own test, as its author would write it: fp16 keys, numerics only, no compile code.

With launch capture on (this repo's addopts) the harness also replays ``store`` as each GPU target: an A100
(sm80) takes the e4b15 branch, which is compiled in fp16, bf16 and fp32. ``test_launch_capture_personality.py``
shows the same test flagging the pre-fix kernel.
"""

import pytest
import torch
from tq_store import store

from harness.fp8 import decode


@pytest.mark.interp_only
def test_store_fp16_keys_roundtrip_exact_values():
    # Multiples of 1/16 in [-1, 1) are e4nv codes exactly (the CPU box's branch).
    key = (torch.arange(-16, 16, dtype=torch.float32) / 16).to(torch.float16)
    assert torch.equal(decode(store(key, fixed=True), "e4nv"), key.float())
