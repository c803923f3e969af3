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
