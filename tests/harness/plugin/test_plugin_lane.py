"""Lane vs assumed arch, and kernels created before the plugin chose the interpreter lane (issue 9)."""

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")

LANE_AND_ARCH = """
import pytest
def test_device(device, harness_lane, harness_arch):
    assert (device, harness_lane, harness_arch.name) == (DEVICE, LANE, "ARCH")
@pytest.mark.interp_only
def test_interp_only(): pass
@pytest.mark.gpu
def test_gpu(): pass
@pytest.mark.arch("sm80")
def test_ampere(): pass
@pytest.mark.arch("sm90")
def test_hopper(): pass
@pytest.mark.harness_op("lane.op")
def test_row(tolerance):
    assert tolerance(dtype="bf16").key == "lane.op/bf16/ARCH"
@pytest.mark.dtype_cases(src="bf16")
def test_case(dtype_case): pass
"""

ROWS = "\n".join(
    f'[[tolerance]]\nop = "lane.op"\ndtype = "bf16"\narch = "{a}"\nrtol = 0.5\n' for a in ("interp", "sm80", "sm90")
)


def _project(pytester, device, lane, arch):
    pytester.makefile(".toml", rows=ROWS)
    pytester.makeini("[pytest]\nharness_tolerance_files = rows.toml\n")
    src = LANE_AND_ARCH.replace("DEVICE", repr(device)).replace("LANE", repr(lane)).replace("ARCH", arch)
    pytester.makepyfile(src)


def test_interp_lane_with_an_assumed_gpu_arch(pytester, monkeypatch):
    """--harness-lane=interp --harness-arch=sm80 on a CPU box: the lane decides device and interp_only/gpu,
    the arch decides arch markers, dtype cases (e4nv needs sm89+) and tolerance rows."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    _project(pytester, "cpu", "interp", "sm80")
    result = pytester.runpytest("-rs", "-v", "--harness-lane=interp", "--harness-arch=sm80")
    for name in ("test_device", "test_interp_only", "test_ampere", "test_row", "test_case[[]bf16-e4b15[]]",
                 "test_case[[]bf16-e5m2[]]"):
        result.stdout.fnmatch_lines([f"*::{name} PASSED*"])
    result.stdout.fnmatch_lines(
        ["*needs a GPU (running on the interp lane)*", "*needs sm90 family (running on sm80)*",
         "*e4nv needs sm89+ (running on sm80)*"], consecutive=False)
    result.assert_outcomes(passed=6, skipped=3)


def test_gpu_lane_with_an_assumed_arch(pytester, monkeypatch):
    """The other way round (a GPU faked for the lane choice; nothing is launched): device cuda, interp_only
    skipped, gpu runs, and the rows/markers follow the assumed sm90."""
    import torch

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    _project(pytester, "cuda", "gpu", "sm90")
    result = pytester.runpytest("-rs", "-v", "--harness-lane=gpu", "--harness-arch=sm90")
    for name in ("test_device", "test_gpu", "test_hopper", "test_row"):
        result.stdout.fnmatch_lines([f"*::{name} PASSED*"])
    result.stdout.fnmatch_lines(["*interpreter-only (running on the gpu lane)*"], consecutive=False)
    result.assert_outcomes(passed=7, skipped=2)


@pytest.mark.parametrize("arch", ["interp", "cpu"])
def test_gpu_lane_refuses_a_non_gpu_arch(pytester, monkeypatch, arch):
    import torch

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest("--harness-lane=gpu", f"--harness-arch={arch}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--harness-arch={arch}: the gpu lane runs kernels on a GPU*"])


EARLY_CONFTEST = """
import triton

@triton.jit
def early_kernel(x_ptr):
    pass
"""

LAUNCH = """
import torch
from conftest import early_kernel

def test_launch():
    early_kernel[(1,)](torch.zeros(1))
"""


@pytest.mark.lane_independent  # an interpreter-lane session in a child: no device
def test_kernel_imported_by_a_conftest_before_configure_is_refused(pytester, monkeypatch):
    """Without the check this project fails inside Triton ('0 active drivers') on a box without a GPU."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    pytester.makeconftest(EARLY_CONFTEST)
    pytester.makepyfile(LAUNCH)
    result = pytester.runpytest_subprocess("--harness-lane=interp")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "*Triton kernels were created before the plugin switched to the interpreter lane: "
        "conftest.early_kernel. *'RuntimeError: 0 active drivers'*export TRITON_INTERPRET=1*",
    ])
    # the remedy the message gives works: with the variable exported the conftest's kernel is interpreted
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    pytester.runpytest_subprocess("--harness-lane=interp").assert_outcomes(passed=1)


@pytest.mark.lane_independent  # an interpreter-lane session in a child: no device
def test_kernel_imported_by_a_test_module_is_fine(pytester, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    pytester.makepyfile(kern=EARLY_CONFTEST)
    pytester.makepyfile(LAUNCH.replace("from conftest", "from kern"))
    pytester.runpytest_subprocess("--harness-lane=interp").assert_outcomes(passed=1)


def test_auto_lane_follows_an_assumed_cpu_arch(monkeypatch):
    """On a GPU box, lane auto with --harness-arch=interp/cpu is the interpreter lane (not a usage error)."""
    import torch

    from harness import gpus, plugin

    class Config:  # the two options the lane choice reads
        def __init__(self, arch):
            self.options = {"harness_lane": "auto", "harness_arch": arch}

        def getoption(self, name):
            return self.options[name]

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with monkeypatch.context() as m:  # a GPU box: its device nodes, and torch sees the GPU
        m.setattr(torch.cuda, "is_available", lambda: True)
        m.setattr(gpus, "may_have_gpu", lambda: True)
        assert [plugin._choose_lane(Config(a)) for a in ("interp", "cpu", "sm80", None, "bogus")] == [
            "interp", "interp", "gpu", "gpu", "gpu"]

    def asked() -> bool:
        raise AssertionError("torch was asked on a box with no GPU device node")

    monkeypatch.setattr(torch.cuda, "is_available", asked)  # a box without them: torch is never asked
    monkeypatch.setattr(gpus, "DEVICE_NODES", ("/nonexistent/nvidia0",))
    monkeypatch.setattr(gpus.sys, "platform", "linux")
    assert plugin._choose_lane(Config(None)) == "interp"


INDEPENDENT = """
import pytest
@pytest.mark.lane_independent
def test_same_everywhere(): pass
def test_unmarked(): pass
"""


@pytest.mark.parametrize(
    "lane, mode, ran",
    [("interp", "auto", True), ("gpu", "auto", False), ("gpu", "run", True), ("interp", "skip", False),
     ("gpu", "skip", False), ("interp", "run", True)],
)
def test_lane_independent_tests_skip_on_the_gpu_lane_unless_asked(pytester, monkeypatch, lane, mode, ran):
    """The GPU lane's time is for what only a GPU shows: a lane_independent test is skipped there by default
    (the interpreter lane runs it), and --harness-lane-independent=run|skip decides on any lane."""
    import torch

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    if lane == "gpu":
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    pytester.makepyfile(INDEPENDENT)
    result = pytester.runpytest("-rs", f"--harness-lane={lane}", "--harness-arch=sm90",
                                f"--harness-lane-independent={mode}")
    result.assert_outcomes(passed=2 if ran else 1, skipped=0 if ran else 1)
    if mode == "skip":  # asked for: the reason says so, not "covered by the interpreter lane" (untrue there)
        result.stdout.fnmatch_lines([f"*lane-independent (--harness-lane-independent=skip; =run runs it on the "
                                     f"{lane} lane)*"])
        result.stdout.no_fnmatch_line("*covered by the interpreter lane*")
    elif not ran:
        result.stdout.fnmatch_lines([f"*lane-independent (covered by the interpreter lane; "
                                     f"--harness-lane-independent=run runs it on the {lane} lane)*"])


def test_lane_independent_option_rejects_other_values(pytester):
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest("--harness-lane-independent=maybe")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--harness-lane-independent*invalid choice*'maybe'*"])


COMPILE_ITEMS = """
import pytest
@pytest.mark.compile_targets("sm80", "sm90")
def test_builds(compile_target): pass
def test_launches(): pass
"""


@pytest.mark.parametrize("mode, ran", [("auto", False), ("run", True)])
def test_compile_matrix_items_are_lane_independent(pytester, monkeypatch, mode, ran):
    """An AOT compile never touches a device: every compile_target item is lane_independent, so the GPU lane
    skips it unless asked (the CPU lanes build the whole matrix), and an unmarked test beside it still runs."""
    import torch

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    pytester.makepyfile(COMPILE_ITEMS)
    result = pytester.runpytest("-rs", "--harness-lane=gpu", "--harness-arch=sm90",
                                f"--harness-lane-independent={mode}")
    result.assert_outcomes(passed=3 if ran else 1, skipped=0 if ran else 2)
    if not ran:
        result.stdout.fnmatch_lines(["SKIPPED [[]2[]] *lane-independent (covered by the interpreter lane*"])


LANGUAGE_CONFTEST = """
import triton.language as tl  # noqa: F401 - at the top, before the plugin chooses the lane
"""

REDUCE = """
import torch
import triton
import triton.language as tl

@triton.jit
def add_max(x_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)
    tl.store(x_ptr + o, x + tl.max(x, axis=0))  # tl.max is triton.language's own @jit function

def test_add_max():
    x = torch.arange(4, dtype=torch.float32)
    add_max[(1,)](x, BLOCK=4)
    assert x.tolist() == [3.0, 4.0, 5.0, 6.0]
"""


@pytest.mark.lane_independent  # an interpreter-lane session in a child: no device
def test_a_conftest_importing_triton_language_at_the_top_works(pytester, monkeypatch):
    """Without the fix every kernel calling tl.max / tl.sum failed with "Cannot call @triton.jit'd outside of the
    scope of a kernel": triton.language's own helpers were decorated before TRITON_INTERPRET was set."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    pytester.makeconftest(LANGUAGE_CONFTEST)
    pytester.makepyfile(REDUCE)
    pytester.runpytest_subprocess("--harness-lane=interp", "-p", "no:cacheprovider").assert_outcomes(passed=1)
