"""Launch a ``@triton.jit`` kernel through its compiled handle once it is compiled: the host side of a
hot-path call without Triton's per-call binding work.

Why: a decode step launches two or three small kernels whose GPU time is 20-80 us; Triton's ``kernel[grid]
(...)`` spends its own tens of microseconds per launch binding and specializing every argument, looking up
the compiled kernel by a string key and building launch metadata (measured as 60-150 us of host time per
``decode_select`` call on the H200 box, 2026-12-03, docs/performance.md; 20.5 us of a turboquant load call).
Here the first launch of a specialization goes through ``kernel[grid]`` (which compiles and returns the
compiled kernel); later ones with the same key call the compiled kernel's launcher as ``JITFunction.run``
does. The key is finer than what Triton 3.6-3.9 specialize on (read off ``native_specialize_impl``: each
tensor's dtype and 16-byte alignment; for each int whether it is 1, a multiple of 16, and 32 or 64 bits):
each tensor's dtype and address modulo 16, and the ints' values, so a hit is always the kernel Triton would
have launched. Ints that change from call to call (a token count) can be keyed by that class instead of
their value (``classed``), so the cache stays small; it is cleared when it holds ``MAX_ENTRIES``.

On the interpreter, or if the installed Triton lacks what this relies on, every launch takes ``kernel[grid]``.
``ENABLED = False`` does too (benchmarks compare both).
"""

from __future__ import annotations

from typing import Any

import torch
import triton

from kernels._interpreter import runs_on_interpreter

__all__ = [
    "Launcher", "int_class", "launcher_for", "launch_planned", "remember", "run_compiled", "ENABLED", "MAX_ENTRIES"
]

#: Switch for benchmarks and tests: False sends every launch through ``kernel[grid](...)``.
ENABLED = True
#: Compiled kernels one Launcher keeps before it starts again (a bound on memory, never reached by the
#: shipped calls: their keys are per layout, not per value).
MAX_ENTRIES = 1024


class Launcher:
    """Launches of one ``@triton.jit`` kernel whose runtime arguments come first, positionally, and whose
    constexprs follow."""

    def __init__(self, kernel: Any, *, tensors: int | None = None, classed: tuple[str, ...] = ()) -> None:
        """``tensors``: how many leading runtime parameters are tensors (default: those named ``*_ptr``).
        ``classed``: int parameters keyed by Triton's specialization class (1, a multiple of 16, 32 or 64
        bits) instead of their value."""
        self.kernel = kernel
        self._compiled: dict[tuple, Any] = {}
        self._n_runtime: int | None = None  # None: always the plain path
        self._n_tensors = 0
        self._classed: tuple[int, ...] = ()
        self._constexpr_names: tuple[str, ...] = ()
        params = getattr(kernel, "params", None)
        if params is not None and not runs_on_interpreter(kernel):
            flags = [p.is_constexpr for p in params]
            n = flags.index(True) if True in flags else len(flags)
            if all(flags[n:]):
                self._n_runtime = n
                self._constexpr_names = tuple(p.name for p in params[n:])
                # leading pointer parameters: named *_ptr in every QSA kernel
                named = next((i for i, p in enumerate(params[:n]) if not p.name.endswith("_ptr")), n)
                self._n_tensors = named if tensors is None else tensors
                names = [p.name for p in params[self._n_tensors:n]]
                unknown = set(classed) - set(names)
                if unknown:
                    raise ValueError(f"{kernel.__name__}: classed names {sorted(unknown)} are not int parameters "
                                     f"after its {self._n_tensors} tensors")
                self._classed = tuple(names.index(c) for c in classed)

    def config(self, constexprs: dict[str, Any], options: dict[str, Any]) -> tuple:
        """A launch configuration (every constexpr by name, plus ``num_warps``/``num_stages``) as the hashable
        value ``__call__`` takes; build it once per shape, not per call."""
        missing = set(self._constexpr_names) - set(constexprs)
        if self._n_runtime is not None and missing:
            raise TypeError(f"{self.kernel.__name__}: constexprs {sorted(missing)} must be given")
        values = tuple(constexprs[n] for n in self._constexpr_names) if self._n_runtime is not None else ()
        return (values, tuple(constexprs.items()), tuple(options.items()))

    def __call__(self, grid: tuple[int, ...], args: tuple, config: tuple) -> Any:
        """``kernel[grid](*args, **constexprs, **options)`` for ``config = self.config(constexprs, options)``.

        ``args``: the kernel's tensors first, then ints (as every QSA and turboquant kernel takes them). The
        cache key is each tensor's dtype and address modulo 16 and the ints' values (a ``classed`` int's
        class): finer than Triton's own key (alignment to 16, and for ints: 1, a multiple of 16, 32 or 64
        bits), so a cached compiled kernel is always the one Triton would pick."""
        if not ENABLED or self._n_runtime is None or len(args) != self._n_runtime:
            return self._plain(grid, args, config)
        nt = self._n_tensors
        device = _device()
        ints = args[nt:]
        if self._classed:
            ints = list(ints)
            for i in self._classed:
                v = ints[i]
                ints[i] = ("class", *int_class(v)) if type(v) is int else v
            ints = tuple(ints)
        key = (device, config, tuple([(a.dtype, a.data_ptr() & 15) for a in args[:nt]]), ints)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._plain(grid, args, config)
            if hasattr(compiled, "result"):  # an async-compile future
                compiled = compiled.result()
            if self._cacheable(args, compiled):
                remember(self._compiled, key, compiled, MAX_ENTRIES)
            return compiled
        run_compiled(compiled, grid, args + config[0], device)
        return compiled

    def runs_directly(self, args: tuple, compiled: Any) -> bool:
        """Whether ``compiled``, which this launcher's call with ``args`` returned, may be launched again with
        :func:`run_compiled` by a caller that keys it by all Triton specializes on (what the store's and
        load's plans do): not when launches go through ``kernel[grid]`` (the interpreter, ``ENABLED = False``,
        a stand-in kernel that is not a ``@triton.jit`` function)."""
        return ENABLED and self._n_runtime is not None and len(args) == self._n_runtime and \
            self._cacheable(args, compiled)

    def _cacheable(self, args: tuple, compiled: Any) -> bool:
        # Tensors exactly in the first _n_tensors places and plain ints after them (so that the key above
        # holds all Triton specializes on), and a compiled kernel with what the direct launch uses.
        nt = self._n_tensors
        return (
            all(type(a) is torch.Tensor for a in args[:nt])
            and all(type(a) is int for a in args[nt:])
            and all(hasattr(compiled, a) for a in ("run", "function", "packed_metadata", "launch_metadata"))
        )

    def _plain(self, grid: tuple[int, ...], args: tuple, config: tuple) -> Any:
        return self.kernel[grid](*args, **dict(config[1]), **dict(config[2]))


_BY_KERNEL: dict[tuple, Launcher] = {}


def launcher_for(kernel: Any, *, tensors: int | None = None, classed: tuple[str, ...] = ()) -> Launcher:
    """The Launcher of ``kernel`` with these options, one per kernel object: a caller that reads its kernel
    from a module global at call time (tests swap it for a recorder or a known-bad variant) gets the launcher
    of the kernel it holds. Kept while there are at most 64."""
    key = (kernel, tensors, classed)
    launcher = _BY_KERNEL.get(key)
    if launcher is None:
        launcher = Launcher(kernel, tensors=tensors, classed=classed)
        remember(_BY_KERNEL, key, launcher, 64)
    return launcher


def int_class(v: int) -> tuple[bool, bool, bool, bool]:
    """What Triton 3.6-3.9 specialize an int argument on (``native_specialize_impl``): whether it is 1, a
    multiple of 16, 32-bit and below 2**63. Two ints of one class launch the same compiled kernel, so a cache
    keyed by the class serves every value of it (a token count, a slot count)."""
    return v == 1, v % 16 == 0, -(2**31) <= v < 2**31, v < 2**63


def launch_planned(launcher: Launcher, compiled_by_class: dict, cls: Any, grid: tuple[int, ...], config: tuple,
                   raw: tuple, viewed: Any) -> None:
    """One launch of a layout a caller has planned (the turboquant store's and load's plans): the plan's
    compiled kernel for ``cls`` directly, with ``raw`` (the runtime arguments, tensors as the caller holds
    them: only their addresses are read), once there is one; else through ``launcher`` with ``viewed()`` (the
    same arguments as the kernel's signature types them), keeping the kernel it compiled when it may run
    directly. The caller's plan key and ``cls`` together must hold all Triton specializes on."""
    compiled = compiled_by_class.get(cls)
    if compiled is not None and ENABLED:
        run_compiled(compiled, grid, raw + config[0])
        return
    args = viewed()
    compiled = launcher(grid, args, config)
    if launcher.runs_directly(args, compiled):
        compiled_by_class[cls] = compiled


def run_compiled(compiled: Any, grid: tuple[int, ...], full: tuple, device: int | None = None) -> None:
    """Launch a compiled kernel on the current stream as ``JITFunction.run`` does once it has found it:
    ``full`` is every argument, constexpr values included, in the kernel's order; tensors need only a
    ``data_ptr()`` (the launcher reads nothing else of them); ``device`` the current device's index when the
    caller has it.

    Launch hooks: Triton 3.5+ keeps them in chains (``knobs.HookChain``) that are never None, so its own launch
    builds the launch metadata and calls both chains on every launch even when they hold no hook. An empty
    chain calls nothing: it is passed as None (the launcher then calls nothing) and no metadata is built (the
    metadata alone was 2.5 us a launch under cProfile on the H200 box, 2026-12-05); a chain that holds a hook
    gets both."""
    stream = _driver().get_current_stream(_device() if device is None else device)
    hooks = triton.knobs.runtime
    enter, leave = _hook(hooks.launch_enter_hook), _hook(hooks.launch_exit_hook)
    meta = None if enter is None and leave is None else compiled.launch_metadata(grid, stream, *full)
    compiled.run(grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1, stream,
                 compiled.function, compiled.packed_metadata, meta, enter, leave, *full)


def _hook(hook: Any) -> Any:
    """``hook``, or None where it would call nothing (None, or a hook chain holding no hook)."""
    calls = getattr(hook, "calls", None)
    return None if hook is None or (isinstance(calls, list) and not calls) else hook


def remember(table: dict, key: Any, value: Any, limit: int) -> None:
    """``table[key] = value``, emptying ``table`` first when it holds ``limit`` entries: the host-side caches
    of the launch path (compiled kernels, launchers, the turboquant calls' plans) are bounded this way, so a
    caller that never repeats a key costs memory once, not without end."""
    if len(table) >= limit:
        table.clear()
    table[key] = value


_DRIVER: list[Any] = []
#: ``torch.cuda.current_device()`` without its lazy-initialization check (microseconds on the H200 box): the
#: index of the current device either way (a launch that finds no compiled kernel goes through Triton, which
#: initializes CUDA). None on a torch without CUDA.
_CUDA_DEVICE = getattr(torch._C, "_cuda_getDevice", None)


def _device() -> int:
    return _CUDA_DEVICE() if _CUDA_DEVICE is not None else torch.cuda.current_device()


def _driver() -> Any:
    if not _DRIVER:
        from triton.runtime import driver

        _DRIVER.append(driver.active)
    return _DRIVER[0]
