"""The demo kernel's own test, as its author would write it: fp16 only, numerics only, no compile code.

With launch capture on (``.ci/run``), this is enough for the harness to compile ``store_fixed`` for every
target in fp16, bf16 and fp32; ``tests/test_launch_capture.py`` shows the same test flagging the pre-fix kernel.
"""

import pytest
import torch
import triton.language as tl
from fp8_store import store

from harness.fp8 import decode


@pytest.mark.interp_only
def test_store_fp16_e4b15_roundtrips_exact_values():
    # Multiples of 1/16 in [-1, 1) are e4b15 codes exactly, so every lane must give them back unchanged.
    x = (torch.arange(-16, 16, dtype=torch.float32) / 16).to(torch.float16)
    got = store(x, tl.float8e4b15, fixed=True)
    assert torch.equal(decode(got, "e4b15"), x.float())
