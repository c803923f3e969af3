"""The Triton 3.6 e5m2 latch (harness.compile.cache) must never change what real GPU kernels compute.

Found on the H200 (2026-12-03, one-worker GPU lane): the latch compiled an sm75 e5m2 cast first, so every
later e5m2 kernel of that worker — the real sm90 ones too — got the software lowering, and the fp16 → e5m2
cast table no longer matched the hardware. On a process that runs kernels on a GPU the latch is that GPU's
target. Checked here on CPU by faking the device and recording what the latch compiles.
"""

import pytest
import torch

import harness.compile.cache as cc
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
