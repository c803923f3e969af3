"""The Triton 3.6 e5m2 latch (harness.compile.cache) must never change what real GPU kernels compute.

Found on the H200 (2026-12-03, one-worker GPU lane): the latch compiled an sm75 e5m2 cast first, so every
later e5m2 kernel of that worker — the real sm90 ones too — got the software lowering, and the fp16 → e5m2
cast table no longer matched the hardware. On a process that runs kernels on a GPU the latch is that GPU's
target. Checked here on CPU by faking the device and recording what the latch compiles.
"""

import os
import subprocess
import sys

import pytest
import torch

import harness.compile.cache as cc
from harness.arch import supports_format
from harness.compile.targets import parse_target

pytestmark = pytest.mark.lane_independent  # fakes the device; the same on every lane


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev=None: (9, 0))
    return monkeypatch


def test_gpu_process_latches_its_own_target(fake):
    assert cc.E5m2Latch.target().name == "sm90"


@pytest.mark.parametrize("cap, name", [((8, 0), "sm80"), ((8, 9), "sm89"), ((12, 0), "sm120")])
def test_each_device_latches_its_own_target(fake, cap, name):
    fake.setattr(torch.cuda, "get_device_capability", lambda dev=None: cap)
    assert cc.E5m2Latch.target().name == name


@pytest.mark.parametrize("why", ["interpreter", "no cuda", "rocm"])
def test_no_gpu_kernels_latches_the_software_path(fake, why):
    if why == "interpreter":
        fake.setenv("TRITON_INTERPRET", "1")
    elif why == "no cuda":
        fake.setattr(torch.cuda, "is_available", lambda: False)
    else:
        fake.setattr(torch.version, "hip", "6.2")
    assert cc.E5m2Latch.target().name == "sm75"


def test_latch_compiles_for_the_chosen_target_on_triton_3_6(fake):
    """The latch itself, with Triton's compile recorded instead of run (and the version check at 3.6)."""
    import triton

    seen = []
    fake.setattr(cc, "triton_at_least", lambda major, minor: (major, minor) <= (3, 6))
    fake.setattr(triton, "compile", lambda src, target=None, options=None: seen.append(target.arch))
    latch = cc.E5m2Latch()
    latch.apply(parse_target("sm80"))
    assert seen == [90]
    latch.apply(parse_target("sm80"))  # once per latch (the process has one)
    assert seen == [90]
    fake.setenv("TRITON_INTERPRET", "1")
    cc.E5m2Latch().apply(parse_target("sm90"))
    assert seen == [90, 75]
    fake.delenv("TRITON_INTERPRET")  # a device this Triton has no target for: no latch at all
    fake.setattr(torch.cuda, "get_device_capability", lambda dev=None: (9, 9))
    cc.E5m2Latch().apply(parse_target("sm90"))
    assert seen == [90, 75]


def test_a_compile_only_process_latches_the_software_path_even_beside_a_gpu(fake):
    """``python -m harness compile`` launches nothing, so no real kernel can get the software lowering: sm75
    whatever the device (faked sm90 here), decided without asking torch."""
    import triton

    seen = []
    fake.setattr(cc, "triton_at_least", lambda major, minor: (major, minor) <= (3, 6))
    fake.setattr(triton, "compile", lambda src, target=None, options=None: seen.append(target.arch))
    fake.setattr(cc.E5m2Latch, "target", staticmethod(lambda: pytest.fail("asked torch about the device")))
    latch = cc.E5m2Latch()
    latch.runs_kernels = False
    latch.apply(parse_target("sm90"))
    assert seen == [75]


def test_the_compile_command_imports_no_torch(tmp_path):
    """The CLI (and so each fresh process that confirms a compile failure) compiles e5m2 casts for sm90 and
    then sm80 (which an sm90 latch would break on Triton 3.6) without importing torch, ~1 CPU-s a process."""
    (tmp_path / "probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(tmp_path / "triton"), HARNESS_COMPILE_CACHE=str(tmp_path / "harness"))
    sig = ",".join(f"{k}={v}" for k, v in (("a_ptr", "*fp16"), ("b_ptr", "*fp32"), ("c_ptr", "*bf16"),
                                          ("codes_ptr", "*u8"), ("da_ptr", "*fp16"), ("db_ptr", "*fp32"),
                                          ("dc_ptr", "*bf16")))
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "harness", "compile", "probe.py::roundtrip",
                           "--sig", sig, "--const", "FMT=tl.float8e5", "--targets", "sm90,sm80", "--no-widen"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert ["probe.roundtrip", "ok", "ok"] in [ln.split() for ln in done.stdout.splitlines()], done.stdout
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "triton" in imported and "torch" not in imported


def test_aot_compiles_do_not_print_the_fp_fusion_warning(monkeypatch):
    """Triton 3.9 warns on every compile that leaves FP fusion unset; the harness passes Triton's own default, so
    an adopter's run does not print it (their TRITON_DEFAULT_FP_FUSION still decides the value)."""
    import warnings

    import triton
    import triton.language as tl

    from harness.compile.matrix import compile_kernel

    utils = pytest.importorskip("triton._utils")
    if not hasattr(utils, "FP_FUSION_DEFAULT_WARNING"):
        pytest.skip("this Triton has no FP-fusion default warning")
    monkeypatch.delenv("TRITON_DEFAULT_FP_FUSION", raising=False)

    @triton.jit
    def fused_axpy(x_ptr, y_ptr, a, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(y_ptr + o, tl.load(x_ptr + o) * a + 1.0)

    utils.warn_once.cache_clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = compile_kernel(fused_axpy, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "a": "fp32"},
                                  constexprs={"BLOCK": 32}, target="sm90")
    assert not [w for w in caught if "FP_FUSION" in str(w.message)]
    assert "fma.rn.f32" in compiled.ptx  # fusion still on, as Triton's default


LATCHED_AFTER_A_USERS_COMPILE = '''
import sys
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from harness.compile.matrix import compile_matrix, error_line

sys.path.insert(0, sys.argv[1])
from probe import roundtrip, sm90_only

SIG = {"a_ptr": "*fp16", "b_ptr": "*fp32", "c_ptr": "*bf16", "codes_ptr": "*u8", "da_ptr": "*fp16",
       "db_ptr": "*fp32", "dc_ptr": "*bf16"}
# the user's own compile first, for sm90, not through the harness: it fixes Triton 3.6's FP8 lowering
triton.compile(ASTSource(roundtrip, {**SIG, "FMT": "constexpr"}, {"FMT": tl.float8e4nv}),
               target=GPUTarget("cuda", 90, 32))
# one target per kind of latched instruction (each failure costs a fresh process): e5m2x2 converts, mul.bf16x2
for fmt, targets in (("float8e5", ["sm80", "sm89"]), ("float8e4nv", ["sm80", "sm89"])):
    res = compile_matrix(roundtrip, signature=SIG, constexprs={"FMT": getattr(tl, fmt)}, targets=targets)
    for t, r in res.items():
        print(fmt, t, "ok" if not isinstance(r, BaseException) else "FAIL " + error_line(r))
res = compile_matrix(sm90_only, signature={"x_ptr": "*bf16"}, targets=["sm80"])["sm80"]
print("sm90_only sm80", "ok" if not isinstance(res, BaseException) else "FAIL " + error_line(res))
'''

PROBE = '''
import triton
import triton.language as tl


@triton.jit
def roundtrip(a_ptr, b_ptr, c_ptr, codes_ptr, da_ptr, db_ptr, dc_ptr, FMT: tl.constexpr):
    o = tl.arange(0, 64)
    tl.store(codes_ptr + o, tl.load(a_ptr + o).to(FMT).to(tl.uint8, bitcast=True))
    tl.store(codes_ptr + 64 + o, tl.load(b_ptr + o).to(FMT).to(tl.uint8, bitcast=True))
    tl.store(codes_ptr + 128 + o, tl.load(c_ptr + o).to(FMT).to(tl.uint8, bitcast=True))
    q = tl.load(codes_ptr + o).to(FMT, bitcast=True)
    tl.store(da_ptr + o, q.to(tl.float16))
    tl.store(db_ptr + o, q.to(tl.float32))
    tl.store(dc_ptr + o, q.to(tl.bfloat16))


@triton.jit
def sm90_only(x_ptr):
    o = tl.arange(0, 64)
    x = tl.load(x_ptr + o)
    y = tl.inline_asm_elementwise("mul.rn.bf16x2 $0, $1, $1;", "=r,r", [x], dtype=tl.bfloat16, is_pure=True,
                                  pack=2)
    tl.store(x_ptr + o, y)
'''


def test_a_users_own_compile_first_does_not_make_other_targets_fail(tmp_path):
    """Triton 3.6 fixes its FP8 lowering at the process's first FP8 compile. When that is the user's own
    ``triton.compile`` for sm90 (before the harness could latch), the same kernels then come out with sm90's
    instructions for sm75-sm89 and ptxas refuses them: ``compile_matrix`` (and so ``assert_compiles``) failed
    where a fresh process compiles. Such a failure is now compiled again in a fresh process, and read back from
    Triton's cache. A failure the fresh process repeats (an sm90 instruction in the kernel's own inline asm)
    stands. Found in a cold-cache run of this suite on Triton 3.6 (tests/harness/test_arch.py). In a process of
    its own: the latch is process state."""
    (tmp_path / "probe.py").write_text(PROBE)
    script = tmp_path / "latched.py"
    script.write_text(LATCHED_AFTER_A_USERS_COMPILE)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(tmp_path / "triton"), HARNESS_COMPILE_CACHE=str(tmp_path / "harness"))
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = {" ".join(ln.split(" ", 2)[:2]): ln.split(" ", 2)[2] for ln in done.stdout.splitlines()}
    want_ok = [f"float8e5 {t}" for t in ("sm80", "sm89") if supports_format(t, "e5m2")[0]] + ["float8e4nv sm89"]
    assert len(want_ok) == 3 and {k: lines[k] for k in want_ok} == dict.fromkeys(want_ok, "ok"), done.stdout
    assert "not supported in this architecture" in lines["float8e4nv sm80"], done.stdout  # the model's refusal
    assert lines["sm90_only sm80"].startswith("FAIL ptxas") and "sm_90" in lines["sm90_only sm80"], done.stdout
