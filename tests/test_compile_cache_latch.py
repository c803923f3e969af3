"""The Triton 3.6 e5m2 latch (harness.compile_cache) must never change what real GPU kernels compute.

Found on the H200 (2026-12-03, one-worker GPU lane): the latch compiled an sm75 e5m2 cast first, so every
later e5m2 kernel of that worker — the real sm90 ones too — got the software lowering, and the fp16 → e5m2
cast table no longer matched the hardware. On a process that runs kernels on a GPU the latch is that GPU's
target. Checked here on CPU by faking the device and recording what the latch compiles.
"""

import pytest
import torch

import harness.compile_cache as cc

pytestmark = pytest.mark.lane_independent  # fakes the device; the same on every lane


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev=None: (9, 0))
    return monkeypatch


def test_gpu_process_latches_its_own_target(fake):
    assert cc._latch_target().name == "sm90"


@pytest.mark.parametrize("cap, name", [((8, 0), "sm80"), ((8, 9), "sm89"), ((12, 0), "sm120")])
def test_each_device_latches_its_own_target(fake, cap, name):
    fake.setattr(torch.cuda, "get_device_capability", lambda dev=None: cap)
    assert cc._latch_target().name == name


@pytest.mark.parametrize("why", ["interpreter", "no cuda", "rocm"])
def test_no_gpu_kernels_latches_the_software_path(fake, why):
    if why == "interpreter":
        fake.setenv("TRITON_INTERPRET", "1")
    elif why == "no cuda":
        fake.setattr(torch.cuda, "is_available", lambda: False)
    else:
        fake.setattr(torch.version, "hip", "6.2")
    assert cc._latch_target().name == "sm75"


def test_latch_compiles_for_the_chosen_target_on_triton_3_6(fake):
    """The latch itself, with Triton's compile recorded instead of run (and the version check at 3.6)."""
    import triton

    import harness.arch

    seen = []
    fake.setattr(cc, "_LATCHED", False)
    fake.setattr(harness.arch, "_triton_at_least", lambda major, minor: (major, minor) <= (3, 6))
    fake.setattr(triton, "compile", lambda src, target=None, options=None: seen.append(target.arch))
    cc._latch_e5m2_lowering(cc.parse_target("sm80"))
    assert seen == [90]
    cc._latch_e5m2_lowering(cc.parse_target("sm80"))  # once per process
    assert seen == [90]
    fake.setattr(cc, "_LATCHED", False)
    fake.setenv("TRITON_INTERPRET", "1")
    cc._latch_e5m2_lowering(cc.parse_target("sm90"))
    assert seen == [90, 75]
    fake.setattr(cc, "_LATCHED", False)  # a device this Triton has no target for: no latch at all
    fake.delenv("TRITON_INTERPRET")
    fake.setattr(torch.cuda, "get_device_capability", lambda dev=None: (9, 9))
    cc._latch_e5m2_lowering(cc.parse_target("sm90"))
    assert seen == [90, 75]
