"""The ``#ttg.nvidia_mma`` accumulator layout (a ``tl.dot`` result) as linear-layout bases
(:mod:`harness.lowering.layout`), against the installed Triton's own conversion (``toLinearLayout``, reached
through Gluon's builder) over versions, warp grids, instruction widths and shapes smaller and larger than a tile."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.lowering.layout import _bases, axis_bits

pytestmark = pytest.mark.lane_independent

_CASES = [
    (3, [4, 1], [16, 16, 16], [64, 32]),
    (3, [8, 1], [16, 16, 32], [128, 64]),
    (3, [4, 1], [16, 64, 16], [64, 64]),
    (3, [4, 1], [16, 128, 16], [128, 256]),
    (3, [4, 2], [16, 32, 16], [128, 128]),
    (3, [2, 2], [16, 8, 16], [64, 64]),
    (3, [4, 1], [16, 256, 16], [64, 256]),
    (3, [4, 1], [16, 64, 16], [16, 32]),  # smaller than the warps' tile: broadcast
    (3, [8, 1], [16, 32, 16], [256, 128]),
    (2, [2, 2], [16, 8], [64, 64]),
    (2, [4, 1], [16, 8], [128, 32]),
    (2, [1, 4], [16, 8], [32, 128]),
    (2, [2, 4], [16, 8], [16, 16]),
]

_ORACLE = """
import json, sys
import triton.experimental.gluon.language as ttgl
from triton._C.libtriton import gluon_ir, ir
ctx = ir.context(); ir.load_dialects(ctx); b = gluon_ir.GluonOpBuilder(ctx)
out = []
for major, warps, instr, shape in json.loads(sys.argv[1]):
    lay = ttgl.NVMMADistributedLayout(version=[major, 0], warps_per_cta=warps, instr_shape=instr)
    ll = b.to_linear_layout(lay._to_ir(b), shape)
    out.append({"register": ll.reg_bases, "lane": ll.lane_bases, "warp": ll.warp_bases})
print(json.dumps(out))
"""


def _text(major: int, warps: list[int], instr: list[int]) -> str:
    w, i = ", ".join(map(str, warps)), ", ".join(map(str, instr))
    return f"#ttg.nvidia_mma<{{versionMajor = {major}, versionMinor = 0, warpsPerCTA = [{w}], instrShape = [{i}]}}>"


def test_mma_bases_are_tritons_own():
    pytest.importorskip("triton.experimental.gluon.language")
    # a child process: Triton's layout objects, alive at exit, make nanobind print leak lines
    p = subprocess.run([sys.executable, "-c", _ORACLE, json.dumps(_CASES)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    want = json.loads(p.stdout.splitlines()[-1])
    for case, w in zip(_CASES, want, strict=True):
        major, warps, instr, shape = case
        got = _bases(_text(major, warps, instr), tuple(shape), {})
        assert got == {k: [list(v) for v in w[k]] for k in ("register", "lane", "warp")}, case


def test_a_row_sum_of_a_hopper_accumulator_reads_its_bits():
    t = _text(3, [4, 1], [16, 16, 16])
    rows = axis_bits(t, (64, 32), 1)  # a row's 32 columns: 2 x 2 x 2 registers, 4 lanes, no warp
    assert (rows.registers, rows.lanes, rows.warps) == ((1, 8, 16), ((0, 2), (1, 4)), ())
    cols = axis_bits(t, (64, 32), 0)  # a column's 64 rows: one register, 8 lanes, 4 warps
    assert (cols.registers, cols.lanes, cols.warps) == ((8,), ((2, 1), (3, 2), (4, 4)), ((0, 16), (1, 32)))


def test_an_mma_layout_of_another_form_is_refused_not_guessed():
    with pytest.raises(ValueError, match="not modelled"):
        _bases("#ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], CTAsPerCGA = [2, 1], "
               "instrShape = [16, 16, 16]}>", (64, 32), {})
    with pytest.raises(ValueError, match="not modelled"):
        _bases(_text(5, [4, 1], [16, 16, 16]), (64, 32), {})
