"""The inputs of the H200 FP8 target tables (``golden/test_fp8_targets``), as the tests that read those tables
take them: the codec's test (``test_fp8_targets.py``) and the interpreter's (``test_fp8_interp_casts.py``)."""

from __future__ import annotations

import numpy as np
import torch

from scripts.capture_fp8_target_tables import fp32_sample_as_captured

#: source dtype id -> torch dtype, as the tables' params name them
SRCS = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def table_inputs(src: str) -> torch.Tensor:
    """The inputs the tables ran on: every fp16 / bf16 bit pattern, or the capture's seeded fp32 sample, drawn
    again here and checked by digest (the golden dir keeps no copy of it)."""
    if src == "fp32":
        return torch.from_numpy(fp32_sample_as_captured().view(np.int32)).view(torch.float32)
    return torch.arange(65536, dtype=torch.int32).to(torch.int16).view(SRCS[src])
