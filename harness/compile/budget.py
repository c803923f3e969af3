"""A wall-clock budget for ptxas in the compiles launch capture makes: past it ptxas is killed and the compile is
*not judged* (:class:`PtxasOverBudget`), neither a failure nor a pass.

Why: Triton's FMA fallback for ``tl.dot`` (fp64 operands; every dot on sm75, which has no MMA Triton uses) unrolls a
128×128×64 tile into 1.4–1.6 MB of PTX, and one ptxas run on it took over 10 minutes on the 2-core CI box (Triton
3.6 and 3.9, test_core's ``test_dot``, docs/capture.md). A capture run must finish; what a killed ptxas would have
said is unknown, so it must not fail the test, and it must not pass as ``ok`` either.

How: Triton's NVIDIA backend runs ptxas as ``subprocess.run(ptxas_cmd, check=True, ...)`` in ``make_cubin``
through its module's ``subprocess`` global (Triton 3.6 and 3.9, ``backends/nvidia/compiler.py``). Inside
:func:`ptxas_budget` that global is a proxy whose ``run``, for a ptxas compile command (the
one with ``--gpu-name=``), waits for ptxas blocking in ``waitpid`` while a timer thread kills it when the budget
expires. Not ``subprocess.run(timeout=)``: with no pipes to read, its wait polls with sleeps of up to 50 ms,
which ended each ptxas run 10-44 ms late (a 20-400 ms child, Python 3.11, the 2-core CI box, 2026-12-06), on
each of the thousands of ptxas runs of a cold capture. Everything else (``ptxas --version``,
``CalledProcessError``, a call with pipes or its own timeout) is the real module's.

Public API: :data:`DEFAULT_SECONDS`, :class:`PtxasOverBudget`, :func:`ptxas_budget`.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

from harness.interp.patch import Patch

__all__ = ["DEFAULT_SECONDS", "TAG", "PtxasOverBudget", "ptxas_budget"]

#: The default budget. Why 60 s: whole compiles of ordinary kernels stay far below it on the shared 2-core CI box
#: (load 5-9), ptxas included: slowest 13.2 s of 3,155 in this repo's whole suite (Triton 3.6, -n 2), 4.6 s in the
#: test_core sample's casts to reductions (3.6 and 3.9); the FMA fallback's ptxas ran over 600 s. 60 s judges every
#: ordinary kernel with room for a slower box, and costs a fallback compile one minute.
DEFAULT_SECONDS = 60.0

#: The tag of the proxy in the patch layer (:mod:`harness.interp.patch`).
TAG = "ptxas-budget"


class PtxasOverBudget(Exception):  # noqa: N818 - named for what it says, as Triton's PTXASError is
    """ptxas ran past the budget and was killed: the compile is not judged."""

    def __init__(self, seconds: float, gpu: str) -> None:
        self.seconds = seconds
        self.gpu = gpu
        super().__init__(f"not judged: ptxas ran over {seconds:g} s for {gpu} and was killed "
                         f"(--harness-ptxas-budget)")


class _TimedSubprocess:
    """The ``subprocess`` module as Triton's NVIDIA backend sees it inside :func:`ptxas_budget`."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    def run(self, cmd: Any, *args: Any, **kwargs: Any) -> Any:
        gpu = _ptxas_gpu(cmd)
        if (gpu is None or args or not _PLAIN_WAIT.issuperset(kwargs)
                or subprocess.PIPE in (kwargs.get("stdout"), kwargs.get("stderr"))):
            return subprocess.run(cmd, *args, **kwargs)
        check = kwargs.pop("check", False)
        killed = threading.Event()

        def kill(proc: subprocess.Popen) -> None:
            killed.set()
            proc.kill()

        with subprocess.Popen(cmd, **kwargs) as proc:
            timer = threading.Timer(self._seconds, kill, (proc,))
            timer.daemon = True
            timer.start()
            try:
                returncode = proc.wait()
            except BaseException:  # Ctrl-C or the like: ptxas goes with us, as subprocess.run kills it
                proc.kill()
                raise
            finally:
                timer.cancel()
        if killed.is_set() and returncode < 0:  # a ptxas that ended as the timer fired keeps its own outcome
            _remove_temp_files(cmd, kwargs.get("stderr"))
            raise PtxasOverBudget(self._seconds, gpu)
        if check and returncode:
            raise subprocess.CalledProcessError(returncode, cmd)
        return subprocess.CompletedProcess(cmd, returncode)


#: the keyword arguments of a ptxas run the proxy waits for itself: no pipe to read, no input, no timeout of its own
#: (Triton 3.6 and 3.9 pass ``check=True, close_fds=False, stderr=<log file>``)
_PLAIN_WAIT = frozenset({"check", "close_fds", "stderr", "stdout", "cwd", "env"})


def _ptxas_gpu(cmd: Any) -> str | None:
    """The ``--gpu-name`` of a ptxas compile command (``sm_80``; the one option of the backend's commands that
    only ptxas takes, whatever its path is named), ``None`` for any other command."""
    if not isinstance(cmd, (list, tuple)) or not cmd:
        return None
    return next((str(a).split("=", 1)[1] for a in cmd if str(a).startswith("--gpu-name=")), None)


def _remove_temp_files(cmd: Any, stderr: Any) -> None:
    """Remove the files of the killed compile that ``make_cubin`` removes itself after a run that returns: its
    PTX input and log (temporary files it made for this compile) and the partial output. Why: a killed run
    leaves 1.5 MB of PTX in the temp directory per compile otherwise. Only files in the temp directory are
    touched."""
    tmp = os.path.realpath(tempfile.gettempdir())
    paths = [str(a) for a in cmd if str(a).endswith(".ptx")]
    if "-o" in cmd[:-1]:
        paths.append(str(cmd[list(cmd).index("-o") + 1]))
    name = getattr(stderr, "name", None)
    if isinstance(name, str):
        paths.append(name)
    for p in paths:
        if os.path.dirname(os.path.realpath(p)) == tmp:
            with contextlib.suppress(OSError):
                os.remove(p)


@contextlib.contextmanager
def ptxas_budget(seconds: float | None) -> Iterator[None]:
    """Compiles inside the block kill ptxas after ``seconds`` of wall time and raise :class:`PtxasOverBudget`;
    ``None`` or 0: no budget. Why wall time: it is what a CI job runs out of."""
    if not seconds:
        yield
        return
    if seconds < 0:
        raise ValueError(f"ptxas budget: expected seconds > 0 (or 0 for none), got {seconds!r}")
    try:
        from triton.backends.nvidia import compiler as nv  # a compile is about to run: triton is loaded
    except ImportError:  # pragma: no cover - no NVIDIA backend: no ptxas to bound
        yield
        return
    with Patch.context() as patch:
        patch.setattr(nv, "subprocess", _TimedSubprocess(float(seconds)), tag=TAG)
        yield
