"""Launch capture compiles the branches a launcher can choose without the launcher (issue 40): the values a launch
did not use of its flags and dtype constexprs. The proof is vLLM's turboquant store behind the two launcher
patterns device replays cannot steer, a memoized device check and a platform decided at import
(``hostdispatch/memo_store.py``), each tested by a plain fp16 test with zero compile lines: the pre-fix kernel
(bf16 keys cast straight to e4b15 on the e4b15 branch) is flagged, the fixed one is clean.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

# Imported before any in-process pytester run: pytester restores sys.modules afterwards, and a second import of
# triton's native extension in one process aborts.
import triton.compiler  # noqa: F401
import triton.language as tl

from harness.compile import launches as lc

HERE = Path(__file__).resolve().parent
MEMO = (HERE / "hostdispatch" / "memo_store.py").read_text()

pytestmark = [pytest.mark.interp_only, pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")]

_TEST = """
import torch
from memo_store import {launcher}

def test_store_fp16():
    key = (torch.arange(-16, 16, dtype=torch.float32) / 16).to(torch.float16)
    assert {launcher}(key, fixed={fixed}).shape == (32,)
"""


def _run(pytester, monkeypatch, tmp_path, launcher: str, fixed: bool):
    pytester.makepyfile(memo_store=MEMO, test_store=_TEST.format(launcher=launcher, fixed=fixed))
    monkeypatch.setenv("HARNESS_COMPILE_CACHE", str(tmp_path / "cache"))
    # capture on, nothing else but the two targets that bound the test's cost: one before sm89, one after
    return pytester.runpytest("-p", "no:hypothesispytest", "-p", "no:cacheprovider", "--harness-lane=interp",
                              "-o", "harness_compile_launches=true", "--harness-targets=sm80,sm90")


def _row(result, kernel: str) -> list[str]:
    line = next(ln for ln in result.outlines if re.match(rf"\S*\.{kernel}\s", ln))
    return re.split(r"\s{2,}", line.strip())[1:]


@pytest.mark.parametrize("launcher", ["store_memoized", "store_platform"])
def test_pre_fix_kernel_behind_an_unsteerable_launcher_is_flagged(pytester, monkeypatch, tmp_path, launcher):
    result = _run(pytester, monkeypatch, tmp_path, launcher, fixed=False)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*compile failure(s) in branches of kernels this test launched that it did not launch*",
        "*memo_store.store_keys @ sm80,sm90: `FP8=tl.float8e4b15`: a value this run did not launch; a launcher may "
        "choose it on another GPU",
        "*FP8=tl.float8e4b15, key_ptr=bf16 fails to compile [[]refused[]]*",
        "*signature: key_ptr=[*]bf16, cache_ptr=[*]u8, n=i32",
        "*error: at memo_store.py:38:*is_fp16() or arg.type.scalar.is_fp32()*",
    ])
    # the launch as run (e4nv) is refused on sm80 as the arch model predicts; the branch is the finding
    assert _row(result, "store_keys") == ["BRANCH 1", "BRANCH 1"]
    # E4B15=1 alone (the fixed kernel's guard) is no finding: with FP8=fp8e5 a bf16 key compiles
    assert "`E4B15=1`" not in result.stdout.str()


@pytest.mark.parametrize("launcher", ["store_memoized", "store_platform"])
def test_fixed_kernel_behind_an_unsteerable_launcher_is_clean(pytester, monkeypatch, tmp_path, launcher):
    result = _run(pytester, monkeypatch, tmp_path, launcher, fixed=True)
    result.assert_outcomes(passed=1)
    assert _row(result, "store_keys_fixed") == ["expected", "ok"]


def test_the_summary_names_the_launcher_replays_could_not_steer(pytester, monkeypatch, tmp_path):
    result = _run(pytester, monkeypatch, tmp_path, "store_memoized", fixed=True)
    result.stdout.fnmatch_lines(["not steered by the device: store_memoized asked torch.cuda about the device in "
                                 "the test, not when replayed as each GPU: * (a memoized device check?)*"])
    result = _run(pytester, monkeypatch, tmp_path, "store_platform", fixed=True)
    result.stdout.fnmatch_lines(["not steered by the device: 1 kernel(s) with flags or dtype constexprs were "
                                 "launched by code that never asked torch.cuda about the device (decided at import*"
                                 "store_keys_fixed;*"])


def _launch(**consts):
    return lc.Launch("m.k", __file__, (("x_ptr", "*fp16"), ("y_ptr", "*bf16"), ("n", "i32")),
                     tuple(consts.items()))


def test_flags_are_bools_zero_one_ints_and_free_dtype_constexprs():
    launch = _launch(FMT=tl.float8e4nv, ACC=tl.float32, SRC=tl.bfloat16, HAS_BIAS=False, SPLIT=1, BLOCK=64)
    flags = lc.code_flags(launch)
    # SRC follows y_ptr (a pointer decides it); BLOCK is a size
    assert set(flags) == {"FMT", "ACC", "HAS_BIAS", "SPLIT"}
    assert [lc.constexpr_text(v) for v in flags["FMT"]] == ["tl.float8e5", "tl.float8e4b15"]
    assert [lc.constexpr_text(v) for v in flags["ACC"]] == ["tl.float16", "tl.bfloat16"]
    assert flags["HAS_BIAS"] == [True] and flags["SPLIT"] == [0]
    pinned = lc.Launch("m.k", __file__, launch.signature, launch.constexprs, pinned=("SPLIT",))
    assert "SPLIT" not in lc.code_flags(pinned)


def test_flag_combinations_are_each_alone_then_together():
    launch = _launch(FP8=tl.float8e4nv, E4B15=False, BLOCK=64)
    got = [lc.flag_text(c) for c, _ in lc.flag_variants(launch)]
    assert got == ["FP8=tl.float8e5", "FP8=tl.float8e4b15", "E4B15=1",
                   "FP8=tl.float8e5, E4B15=1", "FP8=tl.float8e4b15, E4B15=1"]
    one = _launch(E4B15=True, BLOCK=64)
    assert [lc.flag_text(c) for c, _ in lc.flag_variants(one)] == ["E4B15=0"]
    assert lc.flag_variants(_launch(BLOCK=64)) == []


def test_pointer_variants_of_a_branch():
    launch = _launch(E4B15=True)
    assert [label for label, _ in lc.pointer_variants(launch)] == ["all=fp16", "all=bf16", "all=fp32"]
    one = lc.Launch("m.k", __file__, (("x_ptr", "*fp16"), ("n", "i32")), ())
    assert [label for label, _ in lc.pointer_variants(one)] == ["x_ptr=bf16", "x_ptr=fp32"]


def test_a_branch_failing_only_on_some_targets_is_no_finding(monkeypatch):
    """A flag gating sm89+ instructions (the turboquant store's HW_KEYS=1) fails in ptxas for sm80 and compiles for
    sm90: a launcher takes it only where it compiles. A branch failing on every target tried is a finding."""
    from harness.compile import disk_cache as dc
    from harness.compile import findings as fd

    def outcome(launch, target, directory=None, budget=None):
        hw = dict(launch.constexprs)["HW"]
        if hw and target == "sm80":
            return dc.Outcome(False, "ptxas", "ptxas line 5: Feature 'cvt with .e4m3x2/.e5m2x2' requires .target sm_89")
        return dc.Outcome(True)

    monkeypatch.setattr(fd, "launch_outcome", outcome)
    launch = lc.Launch("m.k", __file__, (("x", "*i32"),), (("HW", False),))
    assert fd.check(launch, ["sm80", "sm90"], declarations=lc.Declarations()) == []
    got = fd.check(launch, ["sm80"], declarations=lc.Declarations())  # one target tried: it fails everywhere tried
    assert [(f.flag, f.target) for f in got] == [("HW=1", "sm80")]
