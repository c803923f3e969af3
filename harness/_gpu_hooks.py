"""pytest glue for one GPU per xdist worker (the rules are in ``harness.gpus``; docs/gpu-lane.md).

Registered by ``harness.plugin``. Controller: ``-n auto`` counts GPUs, ``pytest_configure`` hands the plan to
the workers through the environment, the header names it and the terminal summary lists each worker's pin.
Worker: pins itself in ``pytest_load_initial_conftests``, before any conftest.py is imported.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from harness import gpus
from harness.arch import interpreting

_WORKER_KEY = "harness_gpu"
_pin_key = pytest.StashKey["gpus.Pin | None"]()
_plan_key = pytest.StashKey["gpus.Plan | None"]()
_pins_key = pytest.StashKey[list[str]]()  # controller: "gwK: VAR=value ..." per worker, as each goes down


def _plan(interp_lane: bool) -> gpus.Plan | None:
    """The controller's device plan; devices are counted only when the lane may be the GPU one."""
    if interp_lane and gpus.ENV_GPUS not in os.environ:
        return None
    import torch

    hip = getattr(torch.version, "hip", None) is not None
    try:
        return gpus.plan(os.environ, hip=hip, device_count=torch.cuda.device_count)
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: one worker per GPU of the plan (``HARNESS_WORKERS_PER_GPU`` per GPU when set); None (xdist
    counts CPUs) on the interpreter lane.

    Runs before pytest_configure, so the lane is read from the option and the environment the way the
    plugin will choose it; xdist's own override PYTEST_XDIST_AUTO_NUM_WORKERS still wins.
    """
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    lane = config.getoption("harness_lane")
    p = _plan(lane == "interp" or (lane == "auto" and interpreting()))
    try:
        return gpus.auto_workers(p, gpus.workers_per_gpu(os.environ))
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """In an xdist worker: pin it to its GPU before any conftest.py (or test) can initialize CUDA."""
    try:
        early_config.stash[_pin_key] = gpus.pin_worker()
    except (RuntimeError, ValueError) as e:
        raise pytest.UsageError(str(e)) from None


@pytest.hookimpl(trylast=True)  # after harness.plugin chose the lane
def pytest_configure(config: pytest.Config) -> None:
    """Controller of a distributed run: hand the device plan to the workers (spawned after configure)."""
    from harness.plugin import lane_key

    config.stash[_plan_key] = None
    if hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("xdist"):
        return
    config.pluginmanager.register(_XdistPins(config), "harness-gpu-xdist")
    if not getattr(config.option, "tx", None):
        return  # not distributing (no -n / --tx)
    p = _plan(config.stash[lane_key] == "interp")
    if p is None:
        return
    config.stash[_plan_key] = p
    previous = os.environ.get(gpus.ENV_PLAN)
    os.environ[gpus.ENV_PLAN] = p.encode()
    config.add_cleanup(lambda: _restore(gpus.ENV_PLAN, previous))


def _restore(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def pytest_report_header(config: pytest.Config) -> list[str]:
    p = config.stash.get(_plan_key, None)
    if p is None:
        return []
    return [f"harness: xdist workers pinned round-robin to {p.var}={','.join(p.devices)} (from {p.source})"]


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    pin = config.stash.get(_pin_key, None)
    if pin is not None and hasattr(config, "workerinput"):
        config.workeroutput[_WORKER_KEY] = f"{pin}{_device_seen()}"


def _device_seen() -> str:
    """What the pinned worker's torch ended up on, when a test initialized CUDA (never initialized here)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return " (CUDA not initialized)"
    props = torch.cuda.get_device_properties(0)
    uuid = getattr(props, "uuid", None)
    return f" -> {torch.cuda.device_count()} visible, device 0 = {props.name}" + (f" (uuid {uuid})" if uuid else "")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    pins = config.stash.get(_pins_key, None)
    if pins:
        terminalreporter.write_sep("-", "harness: xdist workers and GPUs")
        for line in sorted(pins, key=lambda s: int(s.split(":")[0][2:])):
            terminalreporter.write_line(line)


class _XdistPins:
    """Controller side: collect each worker's pin as it goes down."""

    def __init__(self, config: pytest.Config) -> None:
        self.pins: list[str] = []
        config.stash[_pins_key] = self.pins

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        line = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
        if line:
            self.pins.append(line)
