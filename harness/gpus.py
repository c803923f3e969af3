"""One GPU per xdist worker: which devices the workers share, how many ``-n auto`` starts, who gets which.

Why: every CUDA process starts on device 0, so ``pytest -n 8`` on an 8-GPU box runs eight workers on one GPU
and leaves seven idle (and a test that fills memory starves the others). The fix has to happen before CUDA
initializes in the worker, because the driver reads ``CUDA_VISIBLE_DEVICES`` (``HIP_VISIBLE_DEVICES``,
``ROCR_VISIBLE_DEVICES`` on ROCm) once, at initialization; ``torch.cuda.set_device`` after the fact would
still leave every worker's context, allocator and default device on GPU 0 until a test moves it.

How (the plugin wires these pure functions to xdist's hooks):

- The controller decides the device list (:func:`plan`): ``HARNESS_GPUS`` if set (an explicit request, on
  any lane; ``off`` disables pinning), else the list already in the visibility variable (a pinned CI job
  keeps its pin), else ``range(torch.cuda.device_count())``. ``-n auto`` starts one worker per listed device
  (:func:`auto_workers`), or ``HARNESS_WORKERS_PER_GPU`` per device. The plan travels to the workers in the
  environment variable :data:`ENV_PLAN` (the only channel that exists before a worker's conftest files are
  imported).
- Each worker, in ``pytest_load_initial_conftests`` (before any conftest.py is imported), sets the
  visibility variable to one entry: worker ``gwK`` gets ``devices[K % len(devices)]``
  (:func:`device_for_worker`), so ``-n`` larger than the number of GPUs shares them round-robin. It then
  removes :data:`ENV_PLAN` from its environment, so a pytest started inside a test plans afresh from the
  one device it can see.

Entries are opaque tokens as the driver takes them (``0``, ``GPU-8f3c…`` UUIDs, ``MIG-…``); a worker's pin
is one of the parent's own entries written to the same variable, so it stays in the parent's namespace.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass

__all__ = [
    "DEVICE_NODES",
    "ENV_GPUS",
    "gpu_present",
    "may_have_gpu",
    "ENV_PLAN",
    "Plan",
    "Pin",
    "parse_devices",
    "pin_variable",
    "plan",
    "ENV_PER_GPU",
    "workers_per_gpu",
    "auto_workers",
    "device_for_worker",
    "pin_worker",
]

#: Device nodes a GPU driver creates (NVIDIA's, AMD ROCm's, WSL's paravirtual GPU): on Linux, with none of them no
#: CUDA or ROCm device can be opened, so the lane and the plan are decided without importing torch.
DEVICE_NODES: tuple[str, ...] = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")


def may_have_gpu() -> bool:
    """``False`` when no GPU can be present (Linux without any of :data:`DEVICE_NODES`); ``True`` when torch must
    be asked."""
    return not sys.platform.startswith("linux") or any(os.path.exists(p) for p in DEVICE_NODES)


def gpu_present() -> bool:
    """Whether torch sees a GPU; asked without importing torch where none can be present."""
    if not may_have_gpu():
        return False
    import torch

    return torch.cuda.is_available()

#: User override: a comma-separated device list (as the visibility variable takes it), or ``off``.
ENV_GPUS = "HARNESS_GPUS"
#: Workers ``-n auto`` starts per planned device (default 1). More than one suits a suite of many small kernels
#: whose time is Triton compiles on the CPU, not GPU work (the repo's ``tox -e gpu`` uses 4; docs/gpu-lane.md).
ENV_PER_GPU = "HARNESS_WORKERS_PER_GPU"
#: Controller -> worker hand-off: ``VAR=dev0,dev1,...`` (set by the plugin, consumed by each worker).
ENV_PLAN = "HARNESS_GPU_PLAN"

_CUDA = "CUDA_VISIBLE_DEVICES"
_HIP = "HIP_VISIBLE_DEVICES"
_ROCR = "ROCR_VISIBLE_DEVICES"
_WORKER = re.compile(r"gw(\d+)")
#: What a visibility variable's entry can be: an index, a GPU UUID (CUDA and ROCm: ``GPU-...``) or a MIG instance
#: (``MIG-...``, also the older ``MIG-GPU-<uuid>/<gi>/<ci>``), per the CUDA and ROCm environment-variable docs.
_DEVICE = re.compile(r"\d+|GPU-[0-9A-Za-z-]+|MIG-[0-9A-Za-z/-]+")


@dataclass(frozen=True)
class Plan:
    """The devices the workers are spread over, the variable a worker's pin is written to, and why."""

    var: str
    devices: tuple[str, ...]
    source: str  # "HARNESS_GPUS", the variable's name, or "device count"

    def encode(self) -> str:
        return f"{self.var}={','.join(self.devices)}"

    @classmethod
    def decode(cls, value: str) -> Plan:
        var, sep, devices = value.partition("=")
        if not sep or var not in (_CUDA, _HIP, _ROCR):
            raise ValueError(f"{ENV_PLAN}={value!r} is not VAR=dev,dev,... with VAR one of {_CUDA}, {_HIP}, {_ROCR}")
        return cls(var, parse_devices(devices, ENV_PLAN), ENV_PLAN)


@dataclass(frozen=True)
class Pin:
    """What one worker was given: ``var=value``."""

    worker: str
    var: str
    value: str

    def __str__(self) -> str:
        return f"{self.worker}: {self.var}={self.value}"


def parse_devices(value: str, name: str) -> tuple[str, ...]:
    """A visibility list as the CUDA driver reads it: comma-separated tokens; the list ends at the first
    negative id (``0,-1,2`` is ``0``); empty means no device. A repeated entry is an error (two workers
    would share a GPU while the list claims two)."""
    if not value.strip():
        return ()
    out: list[str] = []
    for token in (t.strip() for t in value.split(",")):
        if not token:
            raise ValueError(f"{name}={value!r} has an empty entry")
        if re.fullmatch(r"-\d+", token):
            break
        out.append(token)
    dup = sorted({t for t in out if out.count(t) > 1})
    if dup:
        raise ValueError(f"{name}={value!r} lists {', '.join(dup)} more than once")
    return tuple(out)


def pin_variable(env: Mapping[str, str], *, hip: bool) -> str:
    """The variable that restricts this stack's devices. CUDA: ``CUDA_VISIBLE_DEVICES``. ROCm: the innermost
    list already set (HIP indexes into ROCR's list, and HIP also honours ``CUDA_VISIBLE_DEVICES``), else
    ``HIP_VISIBLE_DEVICES``."""
    if not hip:
        return _CUDA
    for var in (_HIP, _ROCR, _CUDA):
        if var in env:
            return var
    return _HIP


def plan(env: Mapping[str, str], *, hip: bool, device_count: Callable[[], int]) -> Plan | None:
    """The controller's device list, or None (no GPU, or ``HARNESS_GPUS=off``). ``device_count`` is only
    called when no list is given (it may initialize CUDA in the controller, never in a worker)."""
    var = pin_variable(env, hip=hip)
    own = env.get(ENV_GPUS)
    if own is not None:
        if own.strip().lower() == "off":
            return None
        devices = parse_devices(own, ENV_GPUS)
        if not devices:
            raise ValueError(f"{ENV_GPUS}={own!r} lists no device; use {ENV_GPUS}=off to disable pinning")
        bad = [d for d in devices if not _DEVICE.fullmatch(d)]
        if bad:
            raise ValueError(f"{ENV_GPUS}={own!r}: {', '.join(map(repr, bad))} is no device; expected indices (0,1), "
                             f"GPU-<UUID> or MIG-<UUID> entries as the visibility variables take them, or off")
        if var in env:
            outside = [d for d in devices if d not in parse_devices(env[var], var)]
            if outside:
                raise ValueError(
                    f"{ENV_GPUS}={own!r} names {', '.join(outside)}, which {var}={env[var]!r} hides; "
                    f"list devices from {var}"
                )
        return Plan(var, devices, ENV_GPUS)
    if var in env:
        devices = parse_devices(env[var], var)
        return Plan(var, devices, var) if devices else None
    n = device_count()
    return Plan(var, tuple(str(i) for i in range(n)), "device count") if n > 0 else None


def workers_per_gpu(env: Mapping[str, str]) -> int:
    """``HARNESS_WORKERS_PER_GPU`` as a positive int (1 when unset); anything else is a ValueError naming it."""
    raw = env.get(ENV_PER_GPU)
    if raw is None or not raw.strip():
        return 1
    if not re.fullmatch(r"\+?\d+", raw.strip()) or int(raw) < 1:
        raise ValueError(f"{ENV_PER_GPU}={raw!r} must be a positive integer (workers -n auto starts per GPU)")
    return int(raw)


def auto_workers(p: Plan | None, per_gpu: int = 1) -> int | None:
    """Workers for ``-n auto``: ``per_gpu`` per planned device, so worker ``gwK`` lands on device
    ``K mod len(devices)`` and each device gets the same number; None lets xdist count CPUs (no GPU plan)."""
    if isinstance(per_gpu, bool) or not isinstance(per_gpu, int) or per_gpu < 1:
        raise ValueError(f"per_gpu must be an int >= 1, got {per_gpu!r}")
    return len(p.devices) * per_gpu if p is not None and p.devices else None


def device_for_worker(worker_id: str, p: Plan) -> str:
    """The entry worker ``gwK`` is pinned to: ``devices[K % len(devices)]`` (round-robin past the end)."""
    m = _WORKER.fullmatch(worker_id)
    if m is None:
        raise ValueError(f"worker id {worker_id!r} is not an xdist worker id (gw0, gw1, ...)")
    if not p.devices:
        raise ValueError("the plan lists no device")
    return p.devices[int(m.group(1)) % len(p.devices)]


def pin_worker(env: MutableMapping[str, str] | None = None) -> Pin | None:
    """In an xdist worker with a plan: write its device into the visibility variable and consume the plan.

    None outside a worker or without a plan. Refuses when CUDA is already initialized in this process (the
    pin would be silently ignored).
    """
    env = os.environ if env is None else env
    worker, encoded = env.get("PYTEST_XDIST_WORKER"), env.get(ENV_PLAN)
    if not worker or encoded is None:
        return None
    import sys

    torch = sys.modules.get("torch")  # not imported here: importing is fine, initializing CUDA is not
    if torch is not None and torch.cuda.is_initialized():
        raise RuntimeError(
            f"xdist worker {worker}: CUDA was initialized before the harness could pin the worker to one GPU "
            f"(a plugin initialized it at import); unset {ENV_PLAN} / set {ENV_GPUS}=off, or fix that plugin"
        )
    p = Plan.decode(encoded)
    value = device_for_worker(worker, p)
    env[p.var] = value
    del env[ENV_PLAN]
    return Pin(worker, p.var, value)
