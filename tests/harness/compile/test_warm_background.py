"""Waiting for a warm start that runs beside the GPU run (:mod:`harness.compile.background`): each way a wait
ends, and that an earlier run's files are never taken for this one's."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from harness.compile import background

pytestmark = pytest.mark.lane_independent


@pytest.fixture
def warm_process(tmp_path):
    """A live process that names ``tmp_path / "d"`` on its command line, as the background warm start does
    (``--done-file DONE``), with its pid written where the launcher writes it."""
    done = tmp_path / "d"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "--done-file", str(done)])
    background.write_pid(done, proc.pid)
    yield done
    proc.kill()
    proc.wait()


def test_the_wait_ends_when_the_file_is_written(warm_process):
    done = warm_process
    timer = threading.Timer(0.3, background.write_done, (done, 0, "ok"))
    timer.start()
    w = background.wait_done(done, timeout=30)
    timer.join()
    assert w.outcome == "done" and 0.25 <= w.seconds < 30


@pytest.mark.parametrize("rc, outcome", [(0, "done"), (3, "failed (exit 3)"), (None, "failed (exit None)")])
def test_the_file_says_how_it_ended(tmp_path, rc, outcome):
    done = tmp_path / "d"
    background.write_done(done, rc, "s")
    assert background.wait_done(done, timeout=0).outcome == outcome


def test_an_unreadable_file_ends_the_wait(tmp_path):
    done = tmp_path / "d"
    done.write_text("{half")
    assert background.wait_done(done, timeout=0).outcome == "ended with an unreadable result"


def test_nothing_launched_means_no_wait(tmp_path):
    w = background.wait_done(tmp_path / "d", timeout=30)
    assert w.outcome == "not started" and w.seconds < 1


@pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/stat"), reason="no /proc to read a process state")
def test_an_exited_process_not_yet_reaped_ends_the_wait(tmp_path):
    done = tmp_path / "d"
    proc = subprocess.Popen([sys.executable, "-c", "pass", "--done-file", str(done)])
    background.write_pid(done, proc.pid)
    try:
        deadline = time.monotonic() + 30
        while not _zombie(proc.pid):  # exited; this test, its parent, has not waited for it yet
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.01)
        w = background.wait_done(done, timeout=30)
        assert w.outcome == "ended without a result" and w.seconds < 5
    finally:
        proc.wait()


def _zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rpartition(b")")[2].split()[0] == b"Z"


def test_a_process_gone_without_its_file_ends_the_wait(tmp_path):
    done = tmp_path / "d"
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: its pid is free
    background.write_pid(done, proc.pid)
    w = background.wait_done(done, timeout=30)
    assert w.outcome == "ended without a result" and w.seconds < 5


def test_a_live_process_that_never_ends_times_out(warm_process):
    w = background.wait_done(warm_process, timeout=0.2, poll=0.01)
    assert w.outcome == "timed out" and w.seconds >= 0.2


@pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/cmdline"), reason="no /proc to read a command line")
def test_a_pid_now_naming_another_process_ends_the_wait(tmp_path):
    done = tmp_path / "d"
    background.write_pid(done, os.getpid())  # alive, but this pytest, not a warm start writing d
    w = background.wait_done(done, timeout=30)
    assert w.outcome == "ended without a result" and w.seconds < 5


def test_clear_removes_an_earlier_runs_files_only(tmp_path):
    done = tmp_path / "d"
    background.write_done(done, 0, "old")
    background.write_pid(done, 1)
    (tmp_path / "d.log").write_text("kept")
    background.clear(done)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.log"]
    background.clear(done)  # nothing there: fine
    assert background.wait_done(done, timeout=0).outcome == "not started"


def test_a_negative_timeout_is_refused():
    with pytest.raises(ValueError, match="timeout must be >= 0 seconds, got -1"):
        background.wait_done("x", timeout=-1)


def test_a_failed_write_leaves_no_temp_file(tmp_path):
    (tmp_path / "d").mkdir()  # the rename onto a directory fails
    with pytest.raises(OSError):
        background.write_done(tmp_path / "d", 0, "s")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]
