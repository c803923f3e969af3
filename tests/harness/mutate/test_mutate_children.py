"""The mutant children: each a pytest run in its own process, forked from a server that imported torch once
(``harness.mutate.runner._run_pytest``), or a fresh interpreter with ``HARNESS_MUTATE_FRESH=1``. Either way a
child sees the environment and directory it was given, and one past its timeout is killed with what it started."""

from __future__ import annotations

import os
import sys
import time

import pytest

from harness.mutate import runner

pytestmark = pytest.mark.lane_independent

_TESTS = """
import os, subprocess, sys, time

def test_env_and_cwd():
    assert os.environ["MUTATE_CHILD_PROBE"] == "yes"
    assert os.getcwd() == os.environ["MUTATE_CHILD_DIR"]
    import helper_here  # the directory is first on sys.path, as under python -m pytest
    assert helper_here.VALUE == 7

def test_hangs():
    if os.environ.get("MUTATE_CHILD_HANG") != "1":
        return
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.environ["MUTATE_CHILD_PIDS"], "w") as fh:
        fh.write(f"{os.getpid()} {grandchild.pid}")
    time.sleep(600)
"""


@pytest.fixture(params=["fork server", "fresh"])
def mode(request, monkeypatch):
    monkeypatch.setenv(runner.FRESH_ENV, "1" if request.param == "fresh" else "0")
    return request.param


def _setup(tmp_path, monkeypatch):
    (tmp_path / "test_child.py").write_text(_TESTS)
    (tmp_path / "helper_here.py").write_text("VALUE = 7\n")
    monkeypatch.chdir(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HARNESS_"))}
    env.update(MUTATE_CHILD_PROBE="yes", MUTATE_CHILD_DIR=str(tmp_path), PYTEST_ADDOPTS="-p no:hypothesispytest")
    return env


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:harness", "-q", *args]


def test_a_child_runs_in_its_environment_and_directory(mode, tmp_path, monkeypatch):
    env = _setup(tmp_path, monkeypatch)
    code, out = runner._run_pytest(_cmd("test_child.py"), env, 120)
    assert code == 0, out
    assert "2 passed" in out
    env["MUTATE_CHILD_PROBE"] = "no"  # and its failure is pytest's exit code 1, with pytest's output
    code, out = runner._run_pytest(_cmd("test_child.py::test_env_and_cwd"), env, 120)
    assert code == 1 and "1 failed" in out


def test_a_child_past_its_timeout_is_killed_with_what_it_started(tmp_path, monkeypatch):
    """The fork server's child (the fresh interpreter's kill is subprocess's own, in one line)."""
    monkeypatch.setenv(runner.FRESH_ENV, "0")
    env = _setup(tmp_path, monkeypatch)
    pids = tmp_path / "pids"
    env.update(MUTATE_CHILD_HANG="1", MUTATE_CHILD_PIDS=str(pids))
    t0 = time.monotonic()
    code, out = runner._run_pytest(_cmd("test_child.py::test_hangs"), env, 6)
    assert code is None and out == ""
    assert time.monotonic() - t0 < 60
    child, grandchild = (int(x) for x in pids.read_text().split())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        alive = []
        for pid in (child, grandchild):
            try:
                os.kill(pid, 0)
                with open(f"/proc/{pid}/stat") as fh:  # a zombie awaiting its parent is dead
                    if fh.read().split(") ", 1)[1].startswith("Z"):
                        continue
                alive.append(pid)
            except (ProcessLookupError, FileNotFoundError):
                pass
        if not alive:
            break
        time.sleep(0.2)
    assert not alive, f"still running after the timeout: {alive}"
