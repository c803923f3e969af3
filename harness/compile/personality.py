"""Per-target device personalities: what ``torch.cuda``'s standard device queries answer on each compile target,
and the replay of a test's launcher under each of them.

Why: launchers choose code paths on the host (vLLM's turboquant store: ``e4b15 = torch.cuda.is_available() and
torch.cuda.get_device_capability() < (8, 9)``). On a CPU box ``is_available()`` is ``False``, so the test only
ever launches the branch no GPU takes, and compiling that launch for sm80 says ``expected`` (e4nv is refused
there) while a real A100 takes the other branch and fails to compile. So when a test's host code asked
``torch.cuda`` about the device, capture calls the launcher again (the call the test made that led to the
launch, with the same arguments) once per target, with ``torch.cuda`` answering as that GPU would; the kernels
are not run, their launches are recorded, and each is compiled for the targets that make it.

Which queries answer: ``torch.cuda.is_available``, ``device_count``, ``current_device``,
``get_device_capability``, ``get_device_properties`` (``major``, ``minor``, ``name``,
``multi_processor_count``, ``total_memory``, ``warp_size``...), ``get_device_name``, ``is_bf16_supported``;
they are looked up on ``torch.cuda`` at call time, so a launcher that imported one by name (``from torch.cuda
import get_device_capability``) before the session keeps the real function and is not steered. A target
whose answers to the queries a replay made equal another's reuses that replay (a launcher asking only
``is_available()`` is replayed once for every GPU target).

Public API: :class:`Personality`, :func:`device_personality`, :class:`DeviceQueries`, :class:`ReplayCall`,
:func:`replay_root`.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import inspect
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType, SimpleNamespace
from typing import Any

from harness.compile.targets import parse_target
from harness.interp.patch import Patch

__all__ = ["QUERIES", "DeviceQueries", "Personality", "ReplayCall", "device_personality", "replay_root"]

#: The ``torch.cuda`` functions a personality answers.
QUERIES: tuple[str, ...] = ("is_available", "device_count", "current_device", "get_device_capability",
                            "get_device_properties", "get_device_name", "is_bf16_supported")

# A representative product per target (name, SMs, memory in GiB, shared memory per block optin in KiB).
_PRODUCTS: dict[int, tuple[str, int, int, int]] = {
    75: ("Tesla T4", 40, 15, 64), 80: ("NVIDIA A100-SXM4-80GB", 108, 80, 163), 86: ("NVIDIA A10", 72, 22, 99),
    89: ("NVIDIA L4", 58, 22, 99), 90: ("NVIDIA H100 80GB HBM3", 132, 80, 227),
    100: ("NVIDIA B200", 148, 179, 227), 120: ("NVIDIA GeForce RTX 5090", 170, 31, 99),
}


@dataclass(frozen=True)
class Personality:
    """What ``torch.cuda`` answers on one CUDA target (``sm80`` → capability ``(8, 0)``, an A100's
    properties)."""

    target: str
    major: int
    minor: int
    name: str
    sms: int
    memory_gib: int
    smem_kib: int

    def answer(self, query: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if query == "is_available":
            return True
        if query in ("device_count",):
            return 1
        if query == "current_device":
            return 0
        if query == "get_device_capability":
            return (self.major, self.minor)
        if query == "get_device_name":
            return self.name
        if query == "is_bf16_supported":
            return self.major >= 8
        if query == "get_device_properties":
            return SimpleNamespace(
                name=self.name, major=self.major, minor=self.minor, multi_processor_count=self.sms,
                total_memory=self.memory_gib * 2**30, warp_size=32, max_threads_per_multi_processor=2048,
                shared_memory_per_block_optin=self.smem_kib * 1024, regs_per_multiprocessor=65536,
                L2_cache_size=50 * 2**20, gcnArchName="", is_integrated=False)
        raise KeyError(query)


def device_personality(target: str) -> Personality | None:
    """The personality of a CUDA target, ``None`` for a ROCm one (capture does not steer ``torch.cuda`` as a
    ROCm build: replays cover CUDA targets only)."""
    t = parse_target(target)
    if t.backend != "cuda" or t.cc is None:
        return None
    name, sms, mem, smem = _PRODUCTS.get(t.cc, (f"NVIDIA sm{t.cc}", 100, 40, 99))
    return Personality(t.name, t.cc // 10, t.cc % 10, name, sms, mem, smem)


class DeviceQueries:
    """While entered (a test's call, a replay), ``torch.cuda``'s device queries are wrapped: outside a replay
    they answer as before and note that the host code asked (:attr:`asked`); inside :meth:`as_device` they
    answer as that personality and keep the (query, answer) pairs of the replay."""

    def __init__(self) -> None:
        self.asked = False
        self.active: Personality | None = None
        self.transcript: list[tuple[str, tuple[Any, ...], Any]] = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def watching(self) -> Iterator[DeviceQueries]:
        torch = sys.modules.get("torch")  # a launcher that asks torch.cuda has imported torch before the test
        if torch is None:
            yield self
            return
        cuda = torch.cuda
        with Patch.context() as patch:
            for q in QUERIES:
                if q in cuda.__dict__:
                    patch.setattr(cuda, q, self._wrap(q, cuda.__dict__[q]), tag="device-queries")
            yield self

    def _wrap(self, query: str, orig: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            p = self.active
            if p is None:
                self.asked = True
                return orig(*args, **kwargs)
            got = p.answer(query, args, kwargs)
            self.transcript.append((query, _plain(args), _plain(got)))
            return got

        wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
        wrapper.__name__ = getattr(orig, "__name__", query)
        return wrapper

    @contextlib.contextmanager
    def as_device(self, p: Personality) -> Iterator[list[tuple[str, tuple[Any, ...], Any]]]:
        with self._lock:
            self.active, self.transcript = p, []
        try:
            yield self.transcript
        finally:
            with self._lock:
                self.active = None


def _plain(v: Any) -> Any:
    return tuple(sorted(vars(v).items())) if isinstance(v, SimpleNamespace) else v


def same_answers(p: Personality, transcript: list[tuple[str, tuple[Any, ...], Any]]) -> bool:
    """Whether ``p`` answers every query of a replay's transcript as that replay saw (then it makes the same
    launches: the host code is deterministic given its answers)."""
    return all(_plain(p.answer(q, args, {})) == got for q, args, got in transcript)


@dataclass
class ReplayCall:
    """The call a test made that led to a launch (the launcher), to be made again under a personality."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    frame_id: int = 0

    def call(self) -> None:
        try:
            args, kwargs = copy.deepcopy((self.args, self.kwargs))
        except Exception:  # an argument that cannot be copied: the launcher gets the test's own
            args, kwargs = self.args, self.kwargs
        self.fn(*args, **kwargs)


def replay_root(test_code: Any, skip_files: tuple[str, ...]) -> tuple[FrameType, ReplayCall] | None:
    """The frame the test function called into on the way to the current launch, as a :class:`ReplayCall`;
    ``None`` when the launch was made by the test function itself, by a fixture, or by Triton code."""
    f = sys._getframe(1)
    callee = None
    while f is not None and f.f_code is not test_code:
        callee, f = f, f.f_back
    if f is None or callee is None or callee.f_code.co_filename.startswith(skip_files):
        return None
    fn = _function_of(callee)
    if fn is None:
        return None
    code = callee.f_code
    loc = callee.f_locals
    npos = code.co_argcount
    names = code.co_varnames[:npos + code.co_kwonlyargcount]
    i = npos + code.co_kwonlyargcount
    args = [loc[n] for n in names[:npos] if n in loc]
    if code.co_flags & inspect.CO_VARARGS:
        args += list(loc.get(code.co_varnames[i], ()))
        i += 1
    kwargs = {n: loc[n] for n in names[npos:] if n in loc}
    if code.co_flags & inspect.CO_VARKEYWORDS:
        kwargs.update(loc.get(code.co_varnames[i], {}))
    if inspect.ismethod(fn):
        args = args[1:]
    return callee, ReplayCall(fn, tuple(args), kwargs, id(callee))


def _function_of(frame: FrameType) -> Callable[..., Any] | None:
    code = frame.f_code
    g = frame.f_globals.get(code.co_name)
    if inspect.isfunction(g) and g.__code__ is code:
        return g
    found = [o for o in gc.get_referrers(code) if inspect.isfunction(o) and o.__code__ is code]
    return found[0] if len(found) == 1 else None
