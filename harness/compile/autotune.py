"""``@triton.autotune`` kernels on the interpreter lane, and the configs launch capture compiles.

Why: Triton's ``Autotuner.run`` benchmarks every config when it has more than one, and benchmarking needs a GPU
driver, so on the interpreter lane any autotuned kernel failed with ``RuntimeError: 0 active drivers``. The
plugin wraps ``Autotuner.run`` for the session on the interpreter lane (``--harness-autotune``):

- ``first`` (default): run the first config (after the autotuner's own pruning, if it has any) and nothing else:
  one interpreted run per launch, as fast as an un-tuned kernel;
- ``each``: run every config in turn, each a full interpreted launch of the kernel (the output holds the last
  one's result). For kernels whose launches are idempotent (they overwrite their output); a kernel that
  accumulates into its output (``atomic_add``, ``+=`` into a buffer) sees it once per config.

Either way the launch capture sees every config: the wrapper tells :mod:`harness.compile.launches` which configs
the autotuner had, and capture compiles each distinct (``num_warps``, ``num_stages``, tile constexprs) one,
never collapsing a config's constexprs as sizes. On the GPU lane nothing is wrapped (the autotuner benchmarks as
usual).

Public API: :data:`MODES`, :func:`install`, :func:`configs_in_flight`, :func:`config_values`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from harness.interp.patch import Patch

__all__ = ["MODES", "TAG", "config_values", "configs_in_flight", "install"]

MODES: tuple[str, ...] = ("first", "each")

#: The tag of this wrapper's record in the patch layer (:mod:`harness.interp.patch`).
TAG = "autotune"
_ORIGINAL = "harness_autotune_original"  # on the wrapper: the Autotuner.run it runs configs through

_LOCAL = threading.local()


def configs_in_flight() -> list[Any] | None:
    """The configs of the autotuner whose launch is running on this thread (capture reads them), else None."""
    return getattr(_LOCAL, "configs", None)


@contextlib.contextmanager
def _in_flight(configs: list[Any]) -> Iterator[None]:
    prev = getattr(_LOCAL, "configs", None)
    _LOCAL.configs = configs
    try:
        yield
    finally:
        _LOCAL.configs = prev


def config_values(config: Any) -> tuple[dict[str, Any], dict[str, int]]:
    """A ``triton.Config`` as (constexpr values, launch options ``num_warps``/``num_stages``/...)."""
    opts = {}
    for k in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
        v = getattr(config, k, None)
        if v is not None:
            opts[k] = int(v)
    return dict(getattr(config, "kwargs", {}) or {}), opts


def install(patch: Patch, mode: str) -> None:
    """Wrap ``Autotuner.run`` for ``mode`` (:data:`MODES`), through ``patch``."""
    if mode not in MODES:
        raise ValueError(f"--harness-autotune={mode!r}: expected one of {', '.join(MODES)}")
    from triton.runtime.autotuner import Autotuner  # only on the interpreter lane, when the session starts

    # An outer session's wrapper (a pytester session nested in a test) is replaced, not wrapped: it would narrow
    # the configs capture sees to the one this wrapper runs.
    previous = Autotuner.run
    orig = getattr(previous, _ORIGINAL, previous)

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        configs = list(self.configs)
        self.nargs = dict(zip(self.arg_names, args, strict=False))  # what pruning reads, as run() sets it
        try:
            pruned = list(self.prune_configs(kwargs)) if len(configs) > 1 else configs
        except Exception:  # a pruning model that needs a GPU: keep every config
            pruned = configs
        chosen = pruned or configs
        with _in_flight(configs):
            if len(configs) <= 1:
                return orig(self, *args, **kwargs)
            ret = None
            for cfg in chosen if mode == "each" else chosen[:1]:
                saved = self.configs
                self.configs = [cfg]
                try:
                    ret = orig(self, *args, **kwargs)
                finally:
                    self.configs = saved
            return ret

    setattr(run, _ORIGINAL, orig)
    patch.setattr(Autotuner, "run", run, tag=TAG)
