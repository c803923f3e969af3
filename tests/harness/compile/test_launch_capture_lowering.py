"""Launch capture's matrix says how each target lowers a captured ``tl.dot_scaled``: ``ok emul`` on sm90 (Triton's
upcast-and-MMA emulation), ``ok native`` on sm120 (``mma.sync ... block_scale``), read from the PTX where the
disk cache compiles (``lowering`` in the cache entry) and kept in the ``--harness-report`` cells (pytester, in
process, widening off: two compiles).

The inner project is tests/harness/compile/widening/mx_dot.py (copied) plus a test that launches it once with MX
scales. Each run gets its own compile cache directory.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

# Imported before any in-process pytester run (see test_launch_capture.py): a second import of triton's native
# extension in one process aborts.
import triton.compiler  # noqa: F401
from triton.runtime import interpreter as _interp

from harness.compile.message import LOWERING_LEGEND, render_matrix
from harness.versions import triton_version

ROOT = Path(__file__).resolve().parents[3]
MX_DOT = (ROOT / "tests" / "harness" / "compile" / "widening" / "mx_dot.py").read_text()

pytestmark = [
    pytest.mark.interp_only,
    pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning"),
]

if not hasattr(_interp.InterpreterBuilder, "create_dot_scaled"):
    pytest.skip(f"the Triton {triton_version()} interpreter has no tl.dot_scaled (as kernels/mx/gemm.py refuses "
                "there): the MX launch cannot run to be captured", allow_module_level=True)

_TEST = """
import torch
from mx_dot import mx_dot_tile

def test_mx_dot():
    g = torch.Generator().manual_seed(0)
    a = torch.randint(0, 256, (16, 32), dtype=torch.uint8, generator=g)
    b = torch.randint(0, 256, (16, 32), dtype=torch.uint8, generator=g)
    sa = torch.randint(120, 134, (16, 2), dtype=torch.uint8, generator=g)  # e8m0: 2^-7 .. 2^6
    sb = torch.randint(120, 134, (16, 2), dtype=torch.uint8, generator=g)
    assert mx_dot_tile(a, sa, b, sb).shape == (16, 16)
"""


def test_matrix_and_report_show_native_or_emulated_per_target(pytester, monkeypatch, tmp_path):
    pytester.makepyfile(mx_dot=MX_DOT, test_mx=_TEST)
    cache = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_COMPILE_CACHE", str(cache))
    report = tmp_path / "report.json"
    args = ("-p", "no:hypothesispytest", "-p", "no:cacheprovider", "--harness-lane=interp",
            "--harness-compile-launches", "--harness-no-widen", "--harness-targets=sm90,sm120",
            f"--harness-report={report}")
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([LOWERING_LEGEND, "2 distinct compiles: 2 compiled, *"])
    line = next(ln for ln in result.outlines if ln.startswith("mx_dot.mx_dot "))
    assert re.split(r"\s{2,}", line.strip())[1:] == ["ok emul", "ok native"]
    cells = {c["target"]: c for c in json.loads(report.read_text())["compile_launches"]["cells"]}
    assert cells["sm90"] == {"kernel": "mx_dot.mx_dot", "target": "sm90", "ok": 1, "expected": 0, "failed": 0,
                             "emulated": 1}
    assert cells["sm120"]["native"] == 1 and "emulated" not in cells["sm120"]
    entries = {json.loads(p.read_text())["target"]: json.loads(p.read_text()) for p in cache.glob("??/*.json")}
    assert {t: e["lowering"] for t, e in entries.items()} == {"sm90": "emulated", "sm120": "native"}
    # read back from the disk cache, the same matrix
    again = pytester.runpytest(*args)
    again.stdout.fnmatch_lines(["2 distinct compiles: 0 compiled, 2 read from the disk cache *"])
    assert any(ln.startswith("mx_dot.mx_dot ") and ln.split()[1:] == ["ok", "emul", "ok", "native"]
               for ln in again.outlines)


def test_render_matrix_cells():
    cells = {("m.k", "sm90"): {"ok": 1, "expected": 1, "failed": 0, "emulated": 1},
             ("m.k", "sm100"): {"ok": 2, "expected": 0, "failed": 0, "native": 1, "emulated": 1},
             ("m.j", "sm90"): {"ok": 1, "expected": 0, "failed": 0}}
    rows = {ln.split()[0]: re.split(r"\s{2,}", ln.strip())[1:] for ln in render_matrix(cells, ["sm90", "sm100"])}
    assert rows["m.k"] == ["ok* emul", "ok native|emul"]
    assert rows["m.j"] == ["ok", "-"]
