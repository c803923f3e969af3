"""Launch capture end to end (pytester, in process): a kernel test with zero compile-matrix code catches the
seed bug's shape through widening, and nothing once the fix is in.

The inner project is tests/harness/compile/widening/fp8_store.py (copied) plus a test that launches it with fp16
only. Each run gets its own compile cache directory, so "from the disk cache" is measured, never inherited.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

# Imported before any in-process pytester run: pytester restores sys.modules afterwards, and a second import of
# triton's native extension in one process aborts.
import triton
import triton.compiler  # noqa: F401
import triton.language as tl

from harness import cast_probe
from harness.compile import disk_cache as dc
from harness.compile import launches as lc
from harness.compile.targets import DEFAULT_TARGETS

ROOT = Path(__file__).resolve().parents[3]
STORE_PATH = ROOT / "tests" / "harness" / "compile" / "widening" / "fp8_store.py"
STORE = STORE_PATH.read_text()

pytestmark = [pytest.mark.interp_only, pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")]

_TEST = """
import torch, triton.language as tl
from fp8_store import store

def test_store_fp16():
    x = (torch.arange(-16, 16, dtype=torch.float32) / 16).to(torch.float16)
    assert store(x, tl.{fmt}, fixed={fixed}).shape == (32,)
"""


def _project(pytester, *, fixed: bool, fmt: str = "float8e4b15", extra: str = "") -> None:
    pytester.makepyfile(fp8_store=STORE)
    pytester.makepyfile(test_store=_TEST.format(fixed=fixed, fmt=fmt) + extra)


def _run(pytester, monkeypatch, tmp_path, *args):
    monkeypatch.setenv("HARNESS_COMPILE_CACHE", str(tmp_path / "cache"))
    return pytester.runpytest("-p", "no:hypothesispytest", "-p", "no:cacheprovider", "--harness-lane=interp",
                              *args)


def _matrix_row(result, kernel: str) -> list[str]:
    line = next(ln for ln in result.outlines if ln.startswith(f"fp8_store.{kernel} "))
    return re.split(r"\s{2,}", line.strip())[1:]


def test_widening_flags_the_prefix_store_on_every_target(pytester, monkeypatch, tmp_path):
    _project(pytester, fixed=False)
    result = _run(pytester, monkeypatch, tmp_path, "--harness-compile-launches")
    result.assert_outcomes(failed=1)
    every = ",".join(DEFAULT_TARGETS)
    result.stdout.fnmatch_lines([
        f"*{len(DEFAULT_TARGETS)} compile failure(s) in kernels this test launched*",
        f"*fp8_store.store_prefix @ {every}: variant x_ptr=bf16 (the launch as run compiles) fails to compile "
        "[[]refused[]]",
        "*signature: x_ptr=[*]bf16, y_ptr=[*]u8, n=i32",
        # the location is the kernel source's file:line (Triton counts from the def: "at 5:27")
        "*error: at fp8_store.py:19:27 `tl.store(y_ptr + offs, x.to(FMT)*is_fp16() or arg.type.scalar.is_fp32()*",
        "*launched by: test_store.py::test_store_fp16",
    ])
    assert _matrix_row(result, "store_prefix") == ["FAIL 1"] * len(DEFAULT_TARGETS)
    # fp32 widening compiles: only bf16 is reported
    assert "x_ptr=fp32 (the launch" not in result.stdout.str()


def test_a_failing_test_still_reports_the_compiler_line(pytester, monkeypatch, tmp_path):
    """The test's own failure wins, and the finding's error line is the compiler's (it once read the test's
    assertion message: the compile ran inside the except block and took the failure as its context)."""
    _project(pytester, fixed=False, extra="\ndef test_fails_after_launch():\n    test_store_fp16()\n"
                                          "    assert False, 'the test itself failed'\n")
    result = _run(pytester, monkeypatch, tmp_path, "--harness-compile-launches", "--harness-targets=sm90",
                  "-k", "fails_after")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: the test itself failed*"])
    errors = [ln for ln in result.outlines if ln.startswith("    error: ")]
    assert errors and all("is_fp16()" in ln and "itself failed" not in ln for ln in errors), errors


def test_fixed_store_is_clean(pytester, monkeypatch, tmp_path):
    _project(pytester, fixed=True)
    result = _run(pytester, monkeypatch, tmp_path, "--harness-compile-launches")
    result.assert_outcomes(passed=1)
    # ok*: the FMT=e4nv output-format variant is refused below sm89, as the arch model predicts
    assert _matrix_row(result, "store_fixed") == ["ok*"] * 3 + ["ok"] * (len(DEFAULT_TARGETS) - 3)
    result.stdout.fnmatch_lines(["ok: every compile for the target succeeded; ok*: *"])
    # the launch on every target (through ptxas); per frontend class of targets (their first stands for the class)
    # 2 source variants (x bf16, fp32) + 2 output formats (FMT e4nv, e5m2); the output formats are also branches
    # (FMT a flag), each compiled with x bf16 and fp32 where the frontend takes it: e4nv where the arch model has
    # it (from sm89: Triton's supported_fp8_dtypes), e5m2 on every class (a refusal below sm80 on Triton 3.7+ is
    # the backend's); the second run reads every one back from disk
    from harness.arch import supports_format
    from harness.compile.targets import frontend_class, parse_targets

    classes = list({frontend_class(t): t.name for t in reversed(parse_targets(DEFAULT_TARGETS))}.values())
    branches = sum(2 for t in classes if supports_format(t, "e4nv")[0]) + 2 * len(classes)
    n = len(DEFAULT_TARGETS) + 4 * len(classes) + branches
    result.stdout.fnmatch_lines([f"{n} distinct compiles: {n} compiled, 0 read from the disk cache (*) in *s "
                                 "(widened on every target)"])
    again = _run(pytester, monkeypatch, tmp_path, "--harness-compile-launches")
    again.stdout.fnmatch_lines([f"{n} distinct compiles: 0 compiled, {n} read from the disk cache (*) in *s "
                                "(widened on every target)"])


def test_e4nv_below_sm89_is_expected_not_failed(pytester, monkeypatch, tmp_path):
    _project(pytester, fixed=True, fmt="float8e4nv")
    result = _run(pytester, monkeypatch, tmp_path, "--harness-compile-launches", "--harness-targets=sm80,sm86,sm90")
    result.assert_outcomes(passed=1)
    assert _matrix_row(result, "store_fixed") == ["expected", "expected", "ok"]


def test_expected_per_kernel(pytester, monkeypatch, tmp_path):
    extra = ("\nfrom harness.compile.launches import expect_compile_failure\nimport fp8_store\n"
             "expect_compile_failure(fp8_store.store_prefix, match=r'is_fp16\\(\\)', reason='bf16 keys unsupported')\n")
    _project(pytester, fixed=False, extra=extra)
    result = _run(pytester, monkeypatch, tmp_path, "--harness-compile-launches", "--harness-targets=sm90")
    result.assert_outcomes(passed=1)
    assert _matrix_row(result, "store_prefix") == ["ok*"]  # the declared failure shows: not a plain ok


def test_declarations_end_with_their_session(pytester, monkeypatch, tmp_path):
    """A declaration made in a nested session (its test module calls expect_compile_failure) belongs to that
    session: the outer session's declarations and capture state are the same afterwards."""
    outer = lc.state()
    prefix = lc.Launch("fp8_store.store_prefix", "fp8_store.py", (("x_ptr", "*bf16"),), ())
    assert outer.declarations.reason(prefix, "sm90", "is_fp16()") is None
    test_expected_per_kernel(pytester, monkeypatch, tmp_path)  # the inner session's declaration took effect
    assert lc.state() is outer
    assert outer.declarations.reason(prefix, "sm90", "is_fp16()") is None


def test_ini_enables_and_json_report(pytester, monkeypatch, tmp_path):
    _project(pytester, fixed=False)
    pytester.makeini("[pytest]\nharness_compile_launches = true\n")
    report = tmp_path / "report.json"
    result = _run(pytester, monkeypatch, tmp_path, "--harness-targets=sm80,sm90", f"--harness-report={report}")
    result.assert_outcomes(failed=1)
    data = json.loads(report.read_text())["compile_launches"]
    assert data["targets"] == ["sm80", "sm90"] and data["widen"] is True
    assert [(c["kernel"], c["target"], c["failed"]) for c in data["cells"]] == [
        ("fp8_store.store_prefix", "sm80", 1), ("fp8_store.store_prefix", "sm90", 1)]
    f = data["findings"][0]
    assert (f["variant"], f["signature"], f["test"]) == ("x_ptr=bf16", "x_ptr=*bf16, y_ptr=*u8, n=i32",
                                                         "test_store.py::test_store_fp16")
    assert data["captured_launches"] == {"test_store.py::test_store_fp16": 1}


def test_off_by_default_and_no_widen(pytester, monkeypatch, tmp_path):
    _project(pytester, fixed=False)
    result = _run(pytester, monkeypatch, tmp_path)
    result.assert_outcomes(passed=1)
    assert "compile matrix of captured launches" not in result.stdout.str()
    narrow = _run(pytester, monkeypatch, tmp_path, "--harness-compile-launches", "--harness-no-widen",
                  "--harness-targets=sm90")
    narrow.assert_outcomes(passed=1)
    narrow.stdout.fnmatch_lines(["1 distinct compiles: * compiled, * read from the disk cache (*) in *s "
                                 "(widening off)"])


@pytest.mark.parametrize(
    "args, match",
    [(["--harness-targets=sm91"], "*--harness-targets*cannot compile for sm91*"),
     (["--harness-targets=sm80,sm90", "--harness-widen-targets=sm89"],
      "*--harness-widen-targets: sm89 not among the capture targets (sm80,sm90)*"),
     (["--harness-widen-targets=hopper"], "*--harness-widen-targets: target 'hopper' is not understood*")],
)
def test_bad_targets_are_a_usage_error(pytester, monkeypatch, tmp_path, args, match):
    _project(pytester, fixed=True)
    result = _run(pytester, monkeypatch, tmp_path, "--harness-compile-launches", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([match])


def test_widen_targets_bound_the_variants(pytester, monkeypatch, tmp_path):
    _project(pytester, fixed=False)
    result = _run(pytester, monkeypatch, tmp_path, "--harness-compile-launches", "--harness-targets=sm80,sm90",
                  "--harness-widen-targets=sm90")
    result.assert_outcomes(failed=1)
    assert _matrix_row(result, "store_prefix") == ["ok", "FAIL 1"]
    # sm80: the launch; sm90: the launch, x bf16, x fp32, FMT e4nv, FMT e5m2, and the branches FMT e4nv and e5m2
    # with x bf16 and fp32
    result.stdout.fnmatch_lines(["10 distinct compiles: 10 compiled, 0 read from the disk cache (*) in *s "
                                 "(widened on sm90)",
                                 "*fp8_store.store_prefix @ sm90: variant x_ptr=bf16*"])


_SIZES = """
import torch, triton.language as tl
from fp8_store import store

def test_sizes():
    for n in (16, 32, 48):  # n is a runtime i32: one configuration
        store(torch.zeros(n, dtype=torch.float16), tl.float8e4b15, fixed=True)
    for fmt in (tl.float8e4b15, tl.float8e5):  # a dtype constexpr: two configurations
        store(torch.zeros(8, dtype=torch.float16), fmt, fixed=True)
"""


def test_launches_are_deduplicated_by_configuration(pytester, monkeypatch, tmp_path):
    pytester.makepyfile(fp8_store=STORE, test_sizes=_SIZES)
    # depth full: every compile through ptxas, so a variant that is another launch of the test is that launch
    result = _run(pytester, monkeypatch, tmp_path, "--harness-compile-launches", "--harness-targets=sm90",
                  "--harness-compile-depth=full")
    result.assert_outcomes(passed=1)
    # two configurations (FMT e4b15, e5m2) x (launch, x bf16, x fp32), plus FMT=e4nv once: the e4b15 launch's
    # FMT=e5m2 variant is the e5m2 launch itself; and the branch FMT=e4nv with x bf16 and fp32 (the other
    # branches are the two configurations)
    result.stdout.fnmatch_lines(["9 distinct compiles: 9 compiled, 0 read from the disk cache (*) in *s "
                                 "(widened on every target)"])


def test_nested_capture_keeps_its_launches():
    import torch

    m = _load_store()
    with lc.capture() as outer:
        with lc.capture() as inner:
            m.store(torch.zeros(8, dtype=torch.float16), fixed=True)
        m.store(torch.zeros(8, dtype=torch.float32), fixed=True)
    assert [ln.sig["x_ptr"] for ln in inner] == ["*fp16"]
    assert [ln.sig["x_ptr"] for ln in outer] == ["*fp32"]


def test_nested_session_without_capture_shields_the_outer_test(pytester, monkeypatch, tmp_path):
    """An outer captured test that runs an inner session (capture off) with a bad kernel must not be blamed for
    the inner launches (it was: tests/test_turboquant_meta.py runs the known-bad store in process)."""
    _project(pytester, fixed=False)
    with lc.capture() as outer:
        _run(pytester, monkeypatch, tmp_path).assert_outcomes(passed=1)
    assert outer == []


def test_config_key_collapses_sizes_only():
    a = _launch({"x": "*fp16"}, (("BLOCK", 64), ("FLAG", 1), ("FMT", tl.float8e4nv), ("LIM", 448.0)))
    b = _launch({"x": "*fp16"}, (("BLOCK", 128), ("FLAG", 1), ("FMT", tl.float8e4nv), ("LIM", 448.0)))
    assert a.config_key() == b.config_key() and a != b
    for change in (("FLAG", 0), ("FMT", tl.float8e5), ("LIM", 57344.0)):
        c = _launch({"x": "*fp16"}, tuple(change if k == change[0] else (k, v) for k, v in a.constexprs))
        assert c.config_key() != a.config_key(), change
    assert _launch({"x": "*bf16"}, a.constexprs).config_key() != a.config_key()


# --- the library pieces ----------------------------------------------------------------------------------------


def _load_store():
    import importlib.util
    import sys

    name = "_harness_demo_fp8_store"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, STORE_PATH)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def _launch(sig, consts=()):
    return lc.Launch("m.k", __file__, tuple(sig.items()), tuple(consts))


def test_variants_each_pointer_alone_then_all_together():
    got = [label for label, _ in lc.variants(_launch({"a": "*fp16", "b": "*fp32", "c": "*u8", "n": "i32"}))]
    # all=fp16 is b=fp16 and all=fp32 is a=fp32 (both listed already): duplicates are dropped
    assert got == ["a=bf16", "a=fp32", "b=fp16", "b=bf16", "all=bf16"]
    assert [label for label, _ in lc.variants(_launch({"a": "*bf16", "b": "*bf16"}))] == [
        "a=fp16", "a=fp32", "b=fp16", "b=fp32", "all=fp16", "all=fp32"]
    # the launch itself never appears; no float pointer, no variant
    assert lc.variants(_launch({"c": "*u8", "n": "i32"})) == []


def test_fp8_tensors_of_one_format_are_widened_together():
    """A launch's FP8 tensors of one format come from one choice (the format a launcher picked for the GPU):
    they change format together. Changing one alone made an FP8 → FP8 conversion in ``tl.store`` that no launch
    makes and that Triton 3.6 lowers on no target (Triton's own test_abs_fp8: X and Z both e4nv, ``X=fp8e5``
    failed in ``PassManager::run``); tensors of different formats each still change alone."""
    got = [label for label, _ in lc.variants(_launch({"x": "*fp8e4nv", "z": "*fp8e4nv", "n": "i32"}))]
    assert got == ["x,z=fp8e5", "x,z=fp8e4b15"]
    got = [label for label, _ in lc.variants(_launch({"x": "*fp8e4nv", "z": "*fp8e5", "s": "*fp16"}))]
    assert got == ["s=bf16", "s=fp32", "x=fp8e5", "x=fp8e4b15", "z=fp8e4nv", "z=fp8e4b15"]


def test_launch_types_come_from_the_actual_arguments():

    m = _load_store()
    x = torch.zeros(8, dtype=torch.bfloat16)
    launch = lc.launch_from_args(m.store_fixed, (x, torch.zeros(8, dtype=torch.uint8), 2**40),
                                 {"FMT": tl.float8e4nv, "BLOCK": 64, "num_warps": 2})
    assert launch.signature == (("x_ptr", "*bf16"), ("y_ptr", "*u8"), ("n", "i64"))
    assert launch.constexprs == (("FMT", tl.float8e4nv), ("BLOCK", 64))
    assert launch.options == (("num_warps", 2),)
    assert launch.fp8_formats() == {"e4nv"}
    with pytest.raises(ValueError, match=r"argument 'n' is a str, which has no Triton type"):
        lc.launch_from_args(m.store_fixed, (x, x, "8"), {"FMT": tl.float8e4nv, "BLOCK": 64})


def test_a_reinterpreted_tensor_is_typed_by_its_triton_dtype():
    """``triton.reinterpret(x, tl.float8e4nv)`` (how Triton's own tests pass FP8 and unsigned tensors) is a
    ``TensorWrapper`` whose dtype is a ``tl.dtype``: its launch is typed as Triton's launcher types it, not left
    uncaptured."""
    m = _load_store()
    raw = torch.zeros(8, dtype=torch.uint8)
    args = (triton.reinterpret(raw, tl.float8e4nv), triton.reinterpret(raw, tl.uint8), 8)
    launch = lc.launch_from_args(m.store_fixed, args, {"FMT": tl.float8e5, "BLOCK": 64})
    assert launch.signature == (("x_ptr", "*fp8e4nv"), ("y_ptr", "*u8"), ("n", "i32"))
    words = torch.zeros(8, dtype=torch.int32)
    for ty, text in ((tl.uint32, "*u32"), (tl.int16, "*i16"), (tl.float8e4b15, "*fp8e4b15"), (tl.bfloat16, "*bf16")):
        arg = triton.reinterpret(words if ty.primitive_bitwidth == 32 else raw, ty)
        assert lc.launch_from_args(m.store_fixed, (arg, raw, 8), {"FMT": tl.float8e5, "BLOCK": 64}).signature[0] == (
            "x_ptr", text)


@pytest.mark.parametrize("kind", ["ptxas", "refused", "ok"])
def test_every_outcome_is_kept_on_disk(tmp_path, monkeypatch, kind):
    """Warm runs compile nothing: a ptxas failure is read back too (on Triton 3.6 compile_launch has confirmed it
    in a fresh process before it is returned, so it is no artefact of the process's first compile)."""
    out = dc.Outcome(True) if kind == "ok" else dc.Outcome(False, kind, f"{kind} line")
    calls = []
    monkeypatch.setattr(dc, "compile_launch", lambda launch, target, **_: calls.append(target) or out)
    launch = _launch({"a": "*fp16"})
    first = dc.launch_outcome(launch, "sm80", tmp_path)
    again = dc.launch_outcome(launch, "sm80", tmp_path)
    assert (first.ok, first.kind, first.line) == (again.ok, again.kind, again.line) == (out.ok, out.kind, out.line)
    assert len(calls) == 1
    assert again.cached is True


def test_expect_compile_failure_needs_a_reason():
    with pytest.raises(ValueError, match="reason= must say why"):
        lc.expect_compile_failure("k", "sm90")
    with pytest.raises(TypeError, match="must be a @triton.jit kernel or its name"):
        lc.expect_compile_failure(42, reason="x")


def _probe_launch(src: str, dst: str) -> lc.Launch:
    return lc.Launch("harness.cast_probe.fp8_cast", cast_probe.__file__,
                     (("x_ptr", f"*{src}"), ("y_ptr", "*u8"), ("n", "i32")),
                     (("DST", getattr(tl, dst)), ("VIA_FP32", False), ("BLOCK", 1024)), (("num_warps", 4),))


def test_a_fresh_process_confirms_only_what_really_fails():
    """The second opinion Triton 3.6's ptxas failures get: a launch sm80 supports compiles there; the seed bug
    (bf16 straight to e4b15) does not."""
    assert dc.fresh_process_compiles(_probe_launch("fp16", "float8e5"), "sm80") is True
    assert dc.fresh_process_compiles(_probe_launch("bf16", "float8e4b15"), "sm80") is False


def test_a_fresh_process_finds_a_kernel_defined_inside_a_function():
    """Triton 3.6 keeps the e4nv → bf16 lowering of the first target compiled in a process (after an sm90
    compile, sm89 gets ``cvt.bf16.f16``, which ptxas refuses there), so its ptxas failures are confirmed in a
    fresh process; that process did not find a kernel defined inside a function (Triton's own test_cast), nor
    take its launch's ``num_ctas``, and the failure stood, a false finding."""
    local = ROOT / "tests" / "harness" / "compile" / "widening" / "local_kernels.py"
    opts = (("maxnreg", 128), ("num_ctas", 1), ("num_warps", 1))
    launch = lc.Launch("local_kernels.cast_locally.<locals>.kernel", str(local),
                       (("X", "*fp8e4nv"), ("Z", "*bf16")), (("SIZE", 32),), opts)
    assert dc.fresh_process_compiles(launch, "sm89") is True
    bad = lc.Launch("local_kernels.cast_locally.<locals>.kernel", str(local), (("X", "*bf16"), ("Z", "*fp8e4b15")),
                    (("SIZE", 32),), opts)
    assert dc.fresh_process_compiles(bad, "sm89") is False


def test_the_fresh_process_never_waits_for_the_lock_its_caller_holds(tmp_path, monkeypatch):
    """launch_outcome holds the launch's lock in the shared cache while a Triton-3.6 ptxas failure is confirmed
    in a fresh process; a child reading that cache waited for the lock forever (the CI's 3.6 lane hung). The
    child gets a cache of its own."""
    monkeypatch.setenv("HARNESS_COMPILE_CACHE", str(tmp_path / "shared"))
    seen = []

    def run(args, **kw):
        seen.append(kw["env"].get("HARNESS_COMPILE_CACHE"))
        return SimpleNamespace(returncode=0)

    monkeypatch.setattr(subprocess, "run", run)
    assert dc.fresh_process_compiles(_probe_launch("fp16", "float8e5"), "sm80") is True
    assert seen and seen[0] and Path(seen[0]) != dc.cache_dir() and Path(seen[0]) != tmp_path / "shared"


def test_the_fresh_process_does_not_ask_another(monkeypatch):
    """The child is told it is the fresh process, and there a ptxas failure stands: without that, each child
    confirmed its own failure in yet another child (Triton 3.6, an FP8 tl.dot_scaled below sm89: ~140 processes
    until memory ran out)."""
    envs = []
    monkeypatch.setattr(subprocess, "run",
                        lambda args, **kw: envs.append(kw["env"]) or SimpleNamespace(returncode=1))
    assert dc.fresh_process_compiles(_probe_launch("fp16", "float8e5"), "sm80") is False
    assert envs and envs[0].get(dc.FRESH_ENV) == "1"

    asked = []
    monkeypatch.setattr(dc, "compile_matrix", lambda fn, **kw: {kw["targets"][0]: RuntimeError("boom")})
    monkeypatch.setattr(dc, "error_kind", lambda e: "ptxas")
    monkeypatch.setattr(dc, "triton_at_least", lambda major, minor: False)
    monkeypatch.setattr(dc, "fresh_process_compiles", lambda launch, target: asked.append(target) or True)
    monkeypatch.setenv(dc.FRESH_ENV, "1")
    out = dc.compile_launch(_probe_launch("fp16", "float8e5"), "sm80")
    assert not out.ok and out.kind == "ptxas" and asked == []
    monkeypatch.delenv(dc.FRESH_ENV)
    assert dc.compile_launch(_probe_launch("fp16", "float8e5"), "sm80").ok and asked == ["sm80"]


@pytest.mark.parametrize("old_triton, kind, fresh_ok, want_ok, asks", [
    (True, "ptxas", True, True, True),     # a 3.6 ptxas failure a clean process does not repeat: not a finding
    (True, "ptxas", False, False, True),   # confirmed: reported
    (True, "refused", True, False, False),  # frontend refusals are no process state
    (False, "ptxas", True, False, False),  # Triton >= 3.7: the failure stands as it is
])
def test_ptxas_failures_on_triton_36_are_confirmed_in_a_fresh_process(monkeypatch, old_triton, kind, fresh_ok,
                                                                      want_ok, asks):
    asked = []
    monkeypatch.setattr(dc, "compile_matrix", lambda fn, **kw: {kw["targets"][0]: RuntimeError("boom")})
    monkeypatch.setattr(dc, "error_kind", lambda e: kind)
    monkeypatch.setattr(dc, "triton_at_least", lambda major, minor: not old_triton)
    monkeypatch.setattr(dc, "fresh_process_compiles", lambda launch, target: asked.append(target) or fresh_ok)
    out = dc.compile_launch(_probe_launch("fp16", "float8e5"), "sm80")
    assert out.ok is want_ok and asked == (["sm80"] if asks else [])
    if not want_ok:
        assert out.kind == kind


def test_skip_compile_needs_targets_and_a_reason():
    with pytest.raises(ValueError, match="reason= must say why"):
        lc.skip_compile("k", "sm75")
    with pytest.raises(ValueError, match="name the targets"):
        lc.skip_compile("k", reason="x")
    with pytest.raises(TypeError, match="must be a @triton.jit kernel or its name"):
        lc.skip_compile(42, "sm75", reason="x")


def test_skipped_targets_are_never_compiled(pytester, monkeypatch, tmp_path):
    """A kernel declared with skip_compile for sm75 (it refuses to run there) is compiled for the other targets
    only: its sm75 cell reads '-', and the compile count says so; the other kernel of the module is untouched."""
    extra = ("\nfrom harness.compile.launches import skip_compile\n"
             "skip_compile('store_fixed', 'sm75', reason='refuses GPUs below sm80')\n")
    _project(pytester, fixed=True, extra=extra)
    result = _run(pytester, monkeypatch, tmp_path, "--harness-compile-launches", "--harness-targets=sm75,sm80,sm90",
                  "--harness-widen-targets=sm90")
    result.assert_outcomes(passed=1)
    assert _matrix_row(result, "store_fixed") == ["-", "ok", "ok"]
    # sm80: the launch; sm90: the launch and its 4 variants (x bf16, fp32; FMT e4nv, e5m2), the branches FMT e4nv
    # and e5m2 with x bf16 and fp32; sm75: nothing
    result.stdout.fnmatch_lines(["10 distinct compiles: 10 compiled, *"])
