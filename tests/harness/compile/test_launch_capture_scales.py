"""Launch capture of ``tl.dot_scaled`` end to end (pytester, in process).

Scale-type widening: a test that launches an MXFP4 kernel (e8m0 scales) on the interpreter also compiles its NVFP4
form (e4m3 scales, group 16) for every capture target, and the matrix says where that form compiles and where the
arch model expects it refused (Triton 3.6 on sm90). Lowering: the matrix says how each target lowers the launch,
``ok emul`` on sm90 (Triton's upcast-and-MMA emulation), ``ok native`` on sm120 (``mma.sync ... block_scale``),
read from the PTX where the disk cache compiles (``lowering`` in the cache entry) and kept in the
``--harness-report`` cells.

The inner project is tests/harness/compile/widening/mx_dot.py (copied) plus a test that launches it once with MX
scales. Each run gets its own compile cache directory.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

# Imported before any in-process pytester run (see test_launch_capture.py): a second import of triton's native
# extension in one process aborts.
import triton.compiler  # noqa: F401
from triton.runtime import interpreter as _interp

from harness.compile import findings
from harness.compile import launches as lc
from harness.compile.disk_cache import Outcome
from harness.compile.message import LOWERING_LEGEND, render_matrix
from harness.versions import triton_at_least, triton_version

ROOT = Path(__file__).resolve().parents[3]
MX_DOT = (ROOT / "tests" / "harness" / "compile" / "widening" / "mx_dot.py").read_text()

pytestmark = [
    pytest.mark.interp_only,
    pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning"),
]

_no_dot_scaled = pytest.mark.skipif(
    not hasattr(_interp.InterpreterBuilder, "create_dot_scaled"),
    reason=f"the Triton {triton_version()} interpreter has no tl.dot_scaled (as kernels/mx/gemm.py refuses there): "
           "the MX launch cannot run to be captured")

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


def _row(result, kernel: str) -> list[str]:
    line = next(ln for ln in result.outlines if ln.startswith(f"mx_dot.{kernel} "))
    return re.split(r"\s{2,}", line.strip())[1:]


@_no_dot_scaled
def test_mx_launch_compiles_its_nvfp4_form_per_target(pytester, monkeypatch, tmp_path):
    pytester.makepyfile(mx_dot=MX_DOT, test_mx=_TEST)
    monkeypatch.setenv("HARNESS_COMPILE_CACHE", str(tmp_path / "cache"))
    result = pytester.runpytest("-p", "no:hypothesispytest", "-p", "no:cacheprovider", "--harness-lane=interp",
                                "--harness-compile-launches", "--harness-targets=sm90,sm120")
    result.assert_outcomes(passed=1)
    # per target through ptxas: the launch and its NVFP4 form (the lowering is the target's); c_ptr in fp16 and
    # bf16 through the frontend, once for the class of sm90 and sm120
    result.stdout.fnmatch_lines(["6 distinct compiles: 6 compiled, *"])
    # Triton 3.6 refuses NVFP4 dot_scaled on sm90 (expected: ok*); 3.9 emulates it there; sm120 is native on both.
    # The lowering is the MX launch's (test_matrix_and_report_show_native_or_emulated_per_target)
    assert _row(result, "mx_dot") == (["ok emul", "ok native"] if triton_at_least(3, 9) else ["ok* emul", "ok native"])


def _launch(scale: str, group: int, tile: int = 16) -> lc.Launch:
    sys.path.insert(0, str(ROOT / "tests" / "harness" / "compile" / "widening"))
    try:
        import mx_dot
    finally:
        sys.path.pop(0)
    sig = (("a_ptr", "*u8"), ("as_ptr", scale), ("b_ptr", "*u8"), ("bs_ptr", scale), ("c_ptr", "*fp32"))
    return lc.Launch("mx_dot.mx_dot", mx_dot.__file__, sig, (("GROUP", group), ("BM", tile), ("BN", tile),
                                                              ("BK", 64)), (), mx_dot.mx_dot)


def test_variants_swap_the_scale_type_with_its_group():
    mx, nv = _launch("*u8", 32), _launch("*fp8e4nv", 16)
    assert lc.scale_pointers(mx) == {"as_ptr": "e8m0", "bs_ptr": "e8m0"}
    assert dict(lc.variants(mx))["scales=e4m3(as_ptr,bs_ptr=fp8e4nv,GROUP=16)"] == nv
    # and back; an e4m3 scale pointer is never widened as an FP8 tensor (fp8e5 scales are no launch)
    assert [label for label, _ in lc.variants(nv) if "ptr=fp8" in label] == []
    assert dict(lc.variants(nv))["scales=e8m0(as_ptr,bs_ptr=u8,GROUP=32)"] == mx


def test_the_nvfp4_form_on_sm90_is_what_the_arch_model_predicts(tmp_path):
    """Real compiles, no interpreter (so Triton 3.6 checks its prediction too): the MX launch's NVFP4 form
    compiles for sm90 on Triton 3.9 and is an expected refusal, no finding, on 3.6."""
    rep = findings.Report()
    assert findings.check(_launch("*u8", 32), ["sm90"], report=rep, directory=tmp_path,
                          declarations=lc.Declarations()) == []
    assert rep.counts("mx_dot.mx_dot", "sm90") == {"ok": 1, "expected": 0 if triton_at_least(3, 9) else 1,
                                                    "failed": 0}
    assert rep.compiles == 4  # the launch, c_ptr fp16/bf16, the NVFP4 form


@pytest.mark.parametrize("target", ["sm90", "sm100"])
def test_an_unpredicted_nvfp4_refusal_is_a_finding(monkeypatch, target):
    """Where the arch model predicts no refusal (sm100; sm90 from Triton 3.9 on) an NVFP4 form that fails while
    the MX launch compiles is a finding naming the variant; outcomes faked, so both Triton versions judge both."""
    def outcome(launch, t, directory=None, budget=None):
        nvfp4 = launch.sig["as_ptr"] == "*fp8e4nv"
        return Outcome(False, "refused", "RuntimeError: PassManager::run failed") if nvfp4 else Outcome(True)

    monkeypatch.setattr(findings, "launch_outcome", outcome)
    rep = findings.Report()
    found = findings.check(_launch("*u8", 32), [target], report=rep, declarations=lc.Declarations())
    predicted = target == "sm90" and not triton_at_least(3, 9)
    assert [f.variant for f in found] == ([] if predicted else ["scales=e4m3(as_ptr,bs_ptr=fp8e4nv,GROUP=16)"])
    assert rep.counts("mx_dot.mx_dot", target)["expected"] == int(predicted)


@_no_dot_scaled
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
    assert _row(result, "mx_dot") == ["ok emul", "ok native"]
    cells = {c["target"]: c for c in json.loads(report.read_text())["compile_launches"]["cells"]}
    assert cells["sm90"] == {"kernel": "mx_dot.mx_dot", "target": "sm90", "ok": 1, "expected": 0, "failed": 0,
                             "emulated": 1}
    assert cells["sm120"]["native"] == 1 and "emulated" not in cells["sm120"]
    entries = {json.loads(p.read_text())["target"]: json.loads(p.read_text()) for p in cache.glob("??/*.json")}
    assert {t: e["lowering"] for t, e in entries.items()} == {"sm90": "emulated", "sm120": "native"}
    # read back from the disk cache, the same matrix
    again = pytester.runpytest(*args)
    again.stdout.fnmatch_lines(["2 distinct compiles: 0 compiled, 2 read from the disk cache *"])
    assert _row(again, "mx_dot") == ["ok emul", "ok native"]


def test_render_matrix_cells():
    cells = {("m.k", "sm90"): {"ok": 1, "expected": 1, "failed": 0, "emulated": 1},
             ("m.k", "sm100"): {"ok": 2, "expected": 0, "failed": 0, "native": 1, "emulated": 1},
             ("m.j", "sm90"): {"ok": 1, "expected": 0, "failed": 0}}
    rows = {ln.split()[0]: re.split(r"\s{2,}", ln.strip())[1:] for ln in render_matrix(cells, ["sm90", "sm100"])}
    assert rows["m.k"] == ["ok* emul", "ok native|emul"]
    assert rows["m.j"] == ["ok", "-"]
