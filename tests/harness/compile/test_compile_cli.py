"""``python -m harness compile``: one kernel signature → the kernel × target matrix, for repos with no
interpreter tests. In process (main() with argv) except one real ``python -m`` run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.__main__ import main

pytestmark = pytest.mark.lane_independent  # the same on every lane: the GPU lane skips it

ROOT = Path(__file__).resolve().parents[3]
STORE = ROOT / "tests" / "harness" / "compile" / "widening" / "fp8_store.py"
PATTERNS = ROOT / "tests" / "harness" / "compile" / "patterns" / "real_gpu_patterns.py"
SIG = ["--sig", "x_ptr=*fp16,y_ptr=*u8", "--sig", "n=i32", "--const", "BLOCK=64"]


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_COMPILE_CACHE", str(tmp_path / "cache"))


def test_prefix_store_is_flagged_with_exit_1(capsys):
    rc = main(["compile", f"{STORE}::store_prefix", *SIG, "--const", "FMT=tl.float8e4b15", "--targets=sm80,sm90"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "fp8_store.store_prefix  FAIL 1    FAIL 1" in out
    assert "fp8_store.store_prefix @ sm80,sm90: variant x_ptr=bf16 (the launch as run compiles)" in out
    assert "is_fp16() or arg.type.scalar.is_fp32()" in out


def test_fixed_store_is_clean_and_e4nv_expected_below_sm89(capsys):
    rc = main(["compile", f"{STORE}::store_fixed", *SIG, "--const", "FMT=tl.float8e4nv", "--targets=sm80,sm90"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "fp8_store.store_fixed  expected  ok" in out


_OK = [*SIG, "--const", "FMT=tl.float8e4nv"]


@pytest.mark.parametrize(
    "argv, match",
    [
        (["nonsense", *_OK], "expected MODULE_OR_FILE::KERNEL"),
        ([f"{STORE}::nope", *_OK], "has no attribute 'nope'"),
        (["no/such.py::k", *_OK], "no such file"),
        ([f"{STORE}::store_fixed", *_OK, "--sig", "x_ptr"], "'x_ptr' is not NAME=VALUE"),
        ([f"{STORE}::store_fixed", *SIG, "--const", "FMT=tl.float9"], "triton.language has no 'float9'"),
        ([f"{STORE}::store_fixed", *SIG, "--const", "FMT=float8"], "expected a Python literal"),
        ([f"{STORE}::store_fixed", "--sig", "x_ptr=*fp8_e4m3,y_ptr=*u8,n=i32", *_OK[4:]], "did you mean '*fp8e4nv'"),
        ([f"{STORE}::store_fixed", *_OK, "--targets", "sm91"], "cannot compile for sm91"),
        ([f"{STORE}::store_fixed", "--sig", "x_ptr=*fp16", "--const", "BLOCK=64", "--const", "FMT=tl.float8e4nv"],
         "no type (--sig NAME=TYPE) or value (--const NAME=VALUE) for argument(s) ['y_ptr', 'n']"),
        ([f"{PATTERNS}::copy_even", "--sig", "x_ptr=*fp16,y_ptr=*fp16,n=i32"],
         "EVEN: computed by @triton.heuristics from the call's arguments; give it with --const NAME=VALUE"),
        # launch options the compiler asserts on were reported as findings of the kernel, or printed "ok"
        ([f"{STORE}::store_fixed", *_OK, "--num-warps", "3"], "argument --num-warps: expected a power of 2"),
        ([f"{STORE}::store_fixed", *_OK, "--num-warps", "0"], "argument --num-warps: expected at least 1 warp"),
        ([f"{STORE}::store_fixed", *_OK, "--num-ctas", "0"], "argument --num-ctas: expected at least 1 CTA"),
        ([f"{STORE}::store_fixed", *_OK, "--num-stages", "-2"], "argument --num-stages: expected at least 0 stages"),
        ([f"{STORE}::store_fixed", *_OK, "--maxnreg", "-1"], "argument --maxnreg: expected at least 1 register"),
        # warm-start options were ignored without --warm; a repeated name took the last value
        ([f"{STORE}::store_fixed", *_OK, "--jobs", "-3", "--missing-ok"], "--jobs, --missing-ok: only with --warm"),
        ([f"{STORE}::store_fixed", *_OK, "--warm-target", "bogus"], "--warm-target: only with --warm"),
        ([f"{STORE}::store_fixed", *_OK, "--background", "done"], "--background: only with --warm"),
        ([f"{STORE}::store_fixed", *_OK, "--const", "BLOCK=128"], "--const: BLOCK given twice ('64' and '128')"),
        ([f"{STORE}::store_fixed", *_OK, "--sig", "n=i64"], "--sig: n given twice ('i32' and 'i64')"),
        # what is no @triton.jit kernel said so, not "<module 'triton.language'> is not a callable object"
        ([f"{STORE}::tl", *_OK], "expected a @triton.jit kernel, got a module"),
    ],
)
def test_usage_errors_exit_2_with_the_reason(argv, match, capsys):
    assert main(["compile", *argv]) == 2
    assert match in capsys.readouterr().err


def test_heuristics_kernel_with_a_constexpr_default(capsys):
    """A @triton.heuristics kernel compiles once its heuristic value is given; BLOCK takes its default (64)."""
    rc = main(["compile", f"{PATTERNS}::copy_even", "--sig", "x_ptr=*fp16,y_ptr=*fp16,n=i32", "--const", "EVEN=True",
               "--targets=sm90", "--no-widen"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "constexprs {'EVEN': True, 'BLOCK': 64}" in out and "real_gpu_patterns.copy_even  ok" in out


def test_autotune_kernel_compiles_every_config(capsys):
    rc = main(["compile", f"{PATTERNS}::scale_tuned", "--sig", "x_ptr=*fp32,y_ptr=*fp32,n=i32,s=fp32",
               "--targets=sm90", "--no-widen"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "4 autotune configs" in out and "4 distinct compiles" in out


def test_python_dash_m(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "HARNESS_COMPILE_CACHE": str(tmp_path / "c")}
    env.pop("TRITON_INTERPRET", None)
    p = subprocess.run([sys.executable, "-m", "harness", "compile", f"{STORE}::store_prefix", *SIG, "--const",
                        "FMT=tl.float8e4b15", "--targets=sm90", "--no-widen"], capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "fp8_store.store_prefix  ok" in p.stdout and "1 distinct compiles" in p.stdout


@pytest.mark.parametrize(("source", "match"), [("def (:\n", "bad.py raised SyntaxError"),
                                               ("raise RuntimeError('boom')\n", "raised RuntimeError: boom")])
def test_a_module_that_fails_to_import_is_a_usage_error(tmp_path, capsys, source, match):
    """A syntax error or an exception of the kernel's module was a raw traceback."""
    (tmp_path / "bad.py").write_text(source)
    assert main(["compile", f"{tmp_path / 'bad.py'}::k", *_OK]) == 2
    assert match in capsys.readouterr().err


def test_a_warm_manifest_that_is_no_regular_file_is_refused_unread(tmp_path, capsys):
    """A FIFO manifest blocked ``compile --warm`` forever."""
    os.mkfifo(tmp_path / "ff")
    assert main(["compile", "--warm", str(tmp_path / "ff")]) == 2
    assert "expected a manifest file" in capsys.readouterr().err
