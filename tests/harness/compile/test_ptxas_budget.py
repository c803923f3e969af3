"""ptxas's wall-clock budget in launch capture (issue 40: Triton's FMA fallback for ``tl.dot`` gave ptxas 1.5 MB of
PTX per tile, over 10 minutes a compile, and test_core's dot groups never finished). Past the budget ptxas is
killed and the compile is *not judged*: its own cell mark and summary line, never a failure, never ``ok``; kept on
disk with the budget it ran under, so a bigger budget compiles again.

A slow ptxas is made cheaply: a stub on ``TRITON_PTXAS_PATH`` (the path Triton's NVIDIA backend reads) that sleeps
before running the real one on a compile command and answers ``--version`` / ``--help`` at once."""

from __future__ import annotations

import os
import stat
import tempfile
import time

import pytest

# Imported before any in-process pytester run: pytester restores sys.modules afterwards, and a second import of
# triton's native extension in one process aborts.
import triton
import triton.compiler  # noqa: F401
import triton.language as tl
from triton.backends.nvidia import compiler as nv

from harness.compile import disk_cache as dc
from harness.compile.budget import PtxasOverBudget, ptxas_budget
from harness.compile.errors import error_kind
from harness.compile.launches import Launch
from harness.compile.matrix import compile_matrix
from tests.harness.compile.reported import run_reported

pytestmark = [pytest.mark.lane_independent, pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")]


@triton.jit
def _copy(x_ptr, y_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.load(x_ptr + o) * 2)


def _slow_ptxas(tmp_path, monkeypatch, seconds: float):
    """A ptxas that sleeps ``seconds`` (``$STUB_SLEEP`` overrides) before each compile for sm80 and logs it to the
    returned file (the lowering shim's own compile of each interpreted launch is for sm90: not slowed); Triton's
    own cache goes to a fresh directory, so every compile reaches ptxas. One compile runs first with the real
    ptxas: on Triton 3.6 the process's first CUDA compile also latches the e5m2 lowering with a ptxas run of its
    own (harness.compile.cache.E5m2Latch)."""
    compile_matrix(_copy, signature={"x_ptr": "*fp32", "y_ptr": "*fp32"}, constexprs={"BLOCK": 32}, targets=["sm80"])
    real = nv.get_ptxas(80).path
    log = tmp_path / "ptxas.log"
    stub = tmp_path / "bin" / "ptxas"
    stub.parent.mkdir()
    stub.write_text(f'#!/bin/sh\ncase "$*" in *--gpu-name=sm_80\\ *) echo compile "$*" >> "{log}"; '
                    f'sleep "${{STUB_SLEEP:-{seconds}}}";; esac\nexec "{real}" "$@"\n')
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("TRITON_PTXAS_PATH", str(stub))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    return log


def _compiles(log) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def _launch() -> Launch:
    """A launch no other test here compiles: the process's memo of compiles must not answer for ptxas."""
    return Launch(f"{__name__}._copy", __file__, (("x_ptr", "*bf16"), ("y_ptr", "*bf16")), (("BLOCK", 128),), (),
                  _copy)


def test_ptxas_past_the_budget_is_killed_and_says_so(tmp_path, monkeypatch):
    log = _slow_ptxas(tmp_path, monkeypatch, 30)
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(own_tmp))  # where make_cubin writes its PTX and log
    t0 = time.perf_counter()
    with ptxas_budget(1):
        res = compile_matrix(_copy, signature={"x_ptr": "*fp16", "y_ptr": "*fp16"}, constexprs={"BLOCK": 64},
                             targets=["sm80"])["sm80"]
    assert time.perf_counter() - t0 < 20  # killed after 1 s, not after the stub's 30
    assert isinstance(res, PtxasOverBudget) and error_kind(res) == "budget"
    assert "ptxas ran over 1 s for sm_80" in str(res)
    assert _compiles(log) == 1
    assert sorted(os.listdir(own_tmp)) == []  # the killed compile's PTX, log and partial output are gone
    # outside the block the proxy is gone: the same compile runs ptxas to the end (not memoized as over budget)
    monkeypatch.setenv("STUB_SLEEP", "0")
    again = compile_matrix(_copy, signature={"x_ptr": "*fp16", "y_ptr": "*fp16"}, constexprs={"BLOCK": 64},
                           targets=["sm80"])["sm80"]
    assert not isinstance(again, BaseException)
    assert nv.subprocess is __import__("subprocess")


def test_ptxas_within_the_budget_compiles_as_without_one(tmp_path, monkeypatch):
    _slow_ptxas(tmp_path, monkeypatch, 0)
    with ptxas_budget(30):
        res = compile_matrix(_copy, signature={"x_ptr": "*fp32", "y_ptr": "*fp32"}, constexprs={"BLOCK": 64},
                             targets=["sm80"])["sm80"]
    assert not isinstance(res, BaseException) and "st.global" in res.ptx


@pytest.mark.parametrize("check", [True, False])
def test_a_failing_ptxas_under_the_budget_fails_as_subprocess_run_would(check):
    """Triton reads a ptxas failure from ``CalledProcessError`` (``check=True``) and its log file: the proxy's own
    wait gives both as ``subprocess.run`` does."""
    import subprocess

    from harness.compile.budget import _TimedSubprocess

    cmd = ["sh", "-c", "echo refused >&2; exit 3", "--gpu-name=sm_80"]
    with tempfile.TemporaryFile() as log:
        if check:
            with pytest.raises(subprocess.CalledProcessError) as err:
                _TimedSubprocess(30).run(cmd, check=True, close_fds=False, stderr=log)
            assert err.value.returncode == 3 and err.value.cmd == cmd
        else:
            done = _TimedSubprocess(30).run(cmd, close_fds=False, stderr=log)
            assert (done.returncode, done.args) == (3, cmd)
        log.seek(0)
        assert log.read() == b"refused\n"


def test_a_ptxas_run_reading_a_pipe_or_with_its_own_timeout_is_left_to_subprocess_run():
    """The proxy waits itself only where nothing is to be read: a pipe must be drained while the child runs (a
    blocking wait could deadlock on a full pipe), and a caller's own timeout is the caller's."""
    import subprocess

    from harness.compile.budget import _TimedSubprocess

    cmd = ["sh", "-c", "echo out; echo err >&2", "--gpu-name=sm_80"]
    done = _TimedSubprocess(30).run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert (done.stdout, done.stderr, done.returncode) == (b"out\n", b"err\n", 0)
    done = _TimedSubprocess(30).run(cmd, capture_output=True, timeout=10)
    assert (done.stdout, done.stderr) == (b"out\n", b"err\n")
    with pytest.raises(subprocess.TimeoutExpired):  # the caller's timeout, not the budget: no PtxasOverBudget
        _TimedSubprocess(30).run(["sh", "-c", "sleep 5", "--gpu-name=sm_80"], timeout=0.2)


def test_an_interrupted_wait_kills_ptxas(monkeypatch):
    """Ctrl-C while the proxy waits: ptxas is killed, not left running, as ``subprocess.run`` does."""
    import subprocess

    from harness.compile.budget import _TimedSubprocess

    waited = []
    real_wait = subprocess.Popen.wait

    def wait(self, timeout=None):
        if not waited:
            waited.append(self)
            raise KeyboardInterrupt
        return real_wait(self, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", wait)
    with pytest.raises(KeyboardInterrupt):
        _TimedSubprocess(30).run(["sh", "-c", "sleep 30", "--gpu-name=sm_80"], close_fds=False)
    assert real_wait(waited[0], timeout=10) == -9  # SIGKILL: ended by the proxy, not by sleep


def test_a_negative_budget_is_refused():
    with pytest.raises(ValueError, match="ptxas budget: expected seconds > 0"), ptxas_budget(-1.0):
        pass


def test_an_over_budget_outcome_is_kept_with_its_budget_and_a_bigger_one_compiles_again(tmp_path, monkeypatch):
    log = _slow_ptxas(tmp_path, monkeypatch, 30)
    cache = tmp_path / "cache"
    first = dc.launch_outcome(_launch(), "sm80", cache, budget=1)
    assert (first.ok, first.kind, first.budget, first.cached) == (False, "budget", 1.0, False)
    same = dc.launch_outcome(_launch(), "sm80", cache, budget=1)
    smaller = dc.launch_outcome(_launch(), "sm80", cache, budget=0.5)
    assert (same.kind, same.cached, smaller.kind, smaller.cached) == ("budget", True, "budget", True)
    assert _compiles(log) == 1  # both read back: ptxas over 1 s is over 0.5 s too
    monkeypatch.setenv("STUB_SLEEP", "0")
    bigger = dc.launch_outcome(_launch(), "sm80", cache, budget=20)
    assert (bigger.ok, bigger.cached) == (True, False)
    assert _compiles(log) == 2
    assert dc.launch_outcome(_launch(), "sm80", cache, budget=1).ok  # an ok outcome holds under any budget


_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def double(x_ptr, y_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.load(x_ptr + o) * 2)
"""

_TEST = """
import torch
from kern import double


def test_double():
    x = torch.arange(64, dtype=torch.float16)
    y = torch.empty_like(x)
    double[(1,)](x, y, BLOCK=64)
    assert torch.equal(y, x * 2)
"""


def _run(pytester, tmp_path, *args):
    return run_reported(pytester, tmp_path, "--harness-compile-launches", "--harness-targets=sm80",
                        "--harness-no-widen", *args)


def test_capture_marks_an_over_budget_compile_not_judged_never_failed(pytester, monkeypatch, tmp_path):
    log = _slow_ptxas(tmp_path, monkeypatch, 30)
    monkeypatch.setenv("HARNESS_COMPILE_CACHE", str(tmp_path / "cache"))
    pytester.makepyfile(kern=_KERNEL, test_kern=_TEST)
    t0 = time.perf_counter()
    result, rep = _run(pytester, tmp_path, "--harness-ptxas-budget=1")
    assert time.perf_counter() - t0 < 25
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["kern.double  slow",
                                 "slow (or +slow): not judged: ptxas ran over 1 s (--harness-ptxas-budget)*",
                                 "not judged (ptxas over 1 s): kern.double @ sm80: x_ptr=*fp16, y_ptr=*fp16"])
    assert rep["ptxas_budget"] == 1.0
    assert rep["cells"] == [{"kernel": "kern.double", "target": "sm80", "ok": 0, "expected": 0, "failed": 0,
                             "slow": 1}]
    assert [(f["kernel"], f["target"], f["kind"]) for f in rep["not_judged"]] == [("kern.double", "sm80", "budget")]
    assert rep["findings"] == []
    # a warm rerun under the same budget reads the outcome back; a bigger one (the ini's) compiles it to the end
    result, rep = _run(pytester, tmp_path, "--harness-ptxas-budget=1")
    result.assert_outcomes(passed=1)
    assert (rep["cached"], _compiles(log)) == (1, 1)
    monkeypatch.setenv("STUB_SLEEP", "0")
    result, rep = _run(pytester, tmp_path, "-o", "harness_ptxas_budget=30")
    result.assert_outcomes(passed=1)
    assert rep["cells"][0]["ok"] == 1 and "slow" not in rep["cells"][0] and rep["not_judged"] == []
    assert _compiles(log) == 2


@pytest.mark.parametrize(("args", "where"), [(("--harness-ptxas-budget=soon",), "--harness-ptxas-budget='soon'"),
                                             (("-o", "harness_ptxas_budget=-5"), "ini harness_ptxas_budget='-5'")])
def test_a_budget_that_is_no_number_of_seconds_is_a_usage_error(pytester, args, where):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:xdist", "--harness-lane=interp",
                                "--harness-compile-launches", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{where}: expected seconds >= 0 (0: no limit)*"])
