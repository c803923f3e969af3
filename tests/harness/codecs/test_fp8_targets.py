"""``encode(arch=smXY, triton=V)`` against what each target's Triton V lowering computes, measured on an H200.

The table's own Triton (``triton_lowering`` in its metadata) picks the model, so both CI lanes check every
table: Triton 3.6's (ids ``sm80-fp16``) and 3.9's (ids ``sm80-fp16-t3.9``, captured on 2026-12-04 with
``scripts/capture_fp8_lowering_tables.sh``; its PTX ``.version`` lowered so the H200 image's driver loads it).

The tables (golden/test_fp8_targets, made only by scripts/capture_fp8_target_tables.py on the GPU and
scripts/import_fp8_target_tables.py) hold the codes of a plain cast kernel compiled for sm80, sm89 and sm90
and JIT-run from PTX on one H200, for every fp16/bf16 bit pattern and a 262,144-value fp32 sample, direct
and via fp32. The targets differ (sm80: software e5m2, ties away and no saturation; sm89: fp32 goes through
``cvt.rz.f16.f32`` first, a double rounding), so each must match its own model bit for bit.
"""

import pytest
import torch

from harness.fp8 import encode, get_format
from harness.tolerances import Tolerance
from tests.harness.codecs.fp8_tables import SRCS, table_inputs

#: harness.fp8's model against captured tables, no kernel: the same on every lane, so the GPU lane leaves them to
#: the CPU lanes (they were 61 s of the 1,025 s summed over the H200 lane of 2026-12-05; docs/gpu-lane.md).
pytestmark = pytest.mark.lane_independent

EXACT = Tolerance(max_ulp=0, key="fp8_target_table/exact", note="encode(arch=target) claims bit-exactness")
LOWERINGS = {"": "3.6.0", "-t3.9": "3.9.0"}  # param id suffix -> the Triton whose PTX the table ran
CASES = [(t, s, v) for v in LOWERINGS for t in ("sm80", "sm89", "sm90") for s in SRCS]


@pytest.mark.harness_op("fp8_cast")
@pytest.mark.parametrize("target, src, suffix", CASES, ids=[f"{t}-{s}{v}" for t, s, v in CASES])
def test_encode_matches_target_table(target, src, suffix, golden):
    table, meta = golden.load("codes")
    assert meta["target"] == target and meta["src"] == src and meta["device"] == "NVIDIA H200"
    assert meta["triton_lowering"] == LOWERINGS[suffix]
    x = table_inputs(src)
    assert table.shape == (len(meta["rows"]), x.numel())
    checked = 0
    for row, case in zip(table, meta["rows"], strict=True):
        fmt = case.rsplit("_", 1)[1]
        via = torch.float32 if "_via_fp32_" in case else None
        got = encode(x, fmt, arch=target, via=via, triton=meta["triton_lowering"])
        bad = (got != row).nonzero().flatten()
        assert bad.numel() == 0, (
            f"{target} {case}: {bad.numel()} of {x.numel()} codes differ from the H200 table; first at "
            f"input 0x{int(x.view(torch.int32 if src == 'fp32' else torch.int16)[bad[0]]) & 0xFFFFFFFF:x}: "
            f"encode 0x{int(got[bad[0]]):02x}, table 0x{int(row[bad[0]]):02x}")
        checked += 1
    assert checked == len(meta["rows"]) > 0
    # what the compiler refused for this target, encode refuses too (e4nv before sm89); bf16 -> e4b15 is a
    # refusal of the direct cast only, which the interpreter plugin enforces
    # (tests/harness/interp/test_fp8_interp_casts.py)
    for case in meta["refused"]:
        fmt = case.rsplit("_", 1)[1]
        if get_format(fmt).name == "e4nv":
            with pytest.raises(ValueError, match="e4nv needs sm89"):
                encode(x[:4], fmt, arch=target)
