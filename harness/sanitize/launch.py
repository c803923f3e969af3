"""The sanitizer's hooks in Triton's interpreter: which launch is running, what its tensor arguments' storages
are, and the check of every load, store and atomic against them.

The interpreter (Triton 3.6 and 3.9) runs a launch in ``GridExecutor.__call__``: it copies the tensor arguments
to the host (``_init_args_hst``; on the CPU lane the host copy is the argument's own storage), turns each into the
address of its first byte, and runs the kernel's Python once per program (``InterpreterBuilder.set_grid_idx``).
Every memory access of the kernel reaches one of the builder's methods with a block of addresses and a mask:
``create_masked_load`` / ``create_masked_store`` (``tl.load``, ``tl.store``; also block pointers with their
boundary check on 3.6, tensor descriptors, and 3.9's ``tl.atomic_load`` / ``tl.atomic_store``),
``create_atomic_rmw`` (``tl.atomic_add`` …) and ``create_atomic_cas``. :func:`install` wraps those, through the
session's :class:`~harness.interp.patch.Patch`, on top of the interpreter shims:

- a launch opens where the interpreter copies the arguments to the host (``_init_args_hst``: the arguments'
  storages, :class:`~harness.sanitize.memory.Extents`) and closes where it copies them back
  (``_restore_args_dev``: overlapping stores, :mod:`harness.sanitize.races`, then the error or the warning).
  No shim wraps these two, so a block that lifts a shim's own launch wrapper is still checked; ``__call__``
  only closes a launch the kernel raised out of;
- each access wrapper checks the active lanes and takes the out-of-bounds ones out of the access before it
  happens (a load gives ``other`` there, a store writes nothing, an atomic CAS acts on a scratch word), so the
  process never reads or writes memory it was not given, whatever the mode.

An interpreter that lacks one of these methods (a future Triton) is reported once and nothing is sanitized
(the way :func:`harness.interp.shims.missing_methods` treats the shims). Nothing here imports pytest; Triton and
torch are imported by :func:`install` only.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
import warnings
from typing import Any

import numpy as np

from harness.interp.patch import Patch
from harness.sanitize.memory import Argument, Extents
from harness.sanitize.races import StoreLog
from harness.sanitize.report import Finding, SanitizerError, SanitizerWarning, State, launch_message

__all__ = ["TAG", "install", "silence"]

TAG = "sanitize"

#: What the hooks wrap; an interpreter without one of these is not sanitized.
NEEDED = {
    "InterpreterBuilder": ("create_masked_load", "create_masked_store", "create_atomic_rmw", "create_atomic_cas",
                           "set_grid_idx"),
    "GridExecutor": ("__call__", "_init_args_hst", "_restore_args_dev"),
}
#: Wrapped where present (Triton 3.9): they reach the masked load / store, and a store must not count as plain.
OPTIONAL = ("create_atomic_store",)


#: the IR's read-modify-write ops by the ``tl.atomic_*`` a kernel writes (the IR splits them by operand type)
_RMW_NAMES = {"fadd": "add", "umin": "min", "umax": "max"}


class _Unknown(Exception):
    """An argument that is a pointer but whose memory the hooks cannot know (no torch storage)."""


class _Launch:
    """One running launch of one session's sanitizer."""

    def __init__(self, state: State, kernel: str) -> None:
        self.state = state
        self.mode = state.effective_mode()
        self.kernel = kernel
        self.extents: Extents | None = None
        self.skipped = ""
        self.log = StoreLog()
        self.oob: dict[tuple[str, str], Finding] = {}
        self.sites: dict[tuple[str, int], int] = {}
        self.atomic = ""
        self.scratch = np.zeros(16, dtype=np.uint8)  # what an out-of-bounds CAS lane acts on

    def site(self) -> tuple[int, str]:
        """The index and ``file:line`` of the kernel source line the interpreter is executing."""
        from harness.lowering.sites import interpreter_position

        pos = interpreter_position()
        key = (_shown_path(pos[0]), pos[1]) if pos else ("?", 0)
        i = self.sites.setdefault(key, len(self.sites))
        return i, f"{key[0]}:{key[1]}"

    def where(self, site: int) -> str:
        for (file, line), i in self.sites.items():
            if i == site:
                return f"{file}:{line}"
        return "?"


@functools.lru_cache(maxsize=256)
def _shown_path(path: str) -> str:
    """A kernel file as a report shows it: relative to the working directory when inside it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


_CURRENT: contextvars.ContextVar[_Launch | None] = contextvars.ContextVar("harness_sanitize_launch", default=None)
#: installed sessions' states by id, innermost last: only the innermost session's hooks check
_active: dict[int, State] = {}


def _innermost() -> State | None:
    return next(reversed(_active.values())) if _active else None


def _arguments(fn: Any, args: Any, kwargs: Any) -> list[Argument]:
    """The tensor arguments of a launch, by their names in ``fn``'s signature (tuples as ``name[i]``, a tensor
    descriptor's tensor as ``name.base``)."""
    try:
        named = inspect.getcallargs(fn, *args, **kwargs)
    except TypeError:
        named = {f"argument {i}": a for i, a in enumerate(args)} | dict(kwargs)
    out: list[Argument] = []

    def walk(name: str, v: Any) -> None:
        if isinstance(v, tuple):
            for i, x in enumerate(v):
                walk(f"{name}[{i}]", x)
            return
        if hasattr(v, "block_shape") and hasattr(v, "base") and not hasattr(v, "data_ptr"):
            walk(f"{name}.base", v.base)  # a host-side TensorDescriptor
            return
        if not hasattr(v, "data_ptr"):
            return
        t = v.base if not hasattr(v, "untyped_storage") and hasattr(v, "base") else v  # Triton's TensorWrapper
        if not hasattr(t, "untyped_storage"):
            raise _Unknown(f"argument {name} ({type(v).__name__}) has data_ptr() but no torch storage")
        st = t.untyped_storage()
        out.append(Argument(name, int(t.data_ptr()), int(t.element_size()), int(t.numel()),
                            str(getattr(v, "dtype", t.dtype)).removeprefix("torch."), int(st.data_ptr()),
                            int(st.nbytes())))

    for name, v in named.items():
        walk(name, v)
    return out


def _itemsize(ptrs: Any) -> int:
    ty = ptrs.get_element_ty()
    return max(1, int(ty.primitive_bitwidth) // 8)


def _mask_array(mask: Any) -> np.ndarray:
    # 3.6's block-pointer path passes a bare ndarray; TensorHandles hold theirs in .data
    return np.asarray(mask if isinstance(mask, np.ndarray) else mask.data, dtype=bool)


_NONE = np.zeros(0, dtype=bool)  # "no lane out of bounds", without an array of the block's shape


def _check(L: _Launch, builder: Any, op: str, ptrs: Any, mask: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The block's addresses, its active lanes, and which of them fall outside every storage (recorded as a
    finding of ``L``; an empty array when none does)."""
    p = np.asarray(ptrs.data)
    m = _mask_array(mask) if mask is not None else np.ones(p.shape, dtype=bool)
    if m.shape != p.shape:
        p, m = np.broadcast_arrays(p, m)
    k = _itemsize(ptrs)
    assert L.extents is not None
    if L.extents.span_inside(p, k):
        return p, m, _NONE
    bad = L.extents.outside(p.astype(np.uint64, copy=False), k) & m
    if not bad.any():
        return p, m, _NONE
    _record_oob(L, builder, op, p, m, bad, k, ptrs.get_element_ty())
    return p, m, bad


def _record_oob(L: _Launch, builder: Any, op: str, p: np.ndarray, m: np.ndarray, bad: np.ndarray, k: int,
                ty: Any) -> None:
    _, where = L.site()
    lanes = int(bad.sum())
    prev = L.oob.get((where, op))
    if prev is not None:
        prev.detail["programs_hit"] += 1
        prev.detail["lanes_total"] += lanes
        return
    first = tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(bad.ravel())[0]), bad.shape)) \
        if bad.ndim else ()
    address = int(p[first]) if bad.ndim else int(p)
    detail: dict[str, Any] = {
        "program_id": list(builder.grid_idx), "lanes": lanes, "active": int(m.sum()), "block_index": list(first),
        "address": address, "itemsize": k, "dtype": str(ty), "programs_hit": 1, "lanes_total": lanes,
    }
    assert L.extents is not None
    miss = L.extents.nearest(address, k)
    if miss is not None:
        a = miss.argument
        detail["nearest"] = {"name": a.name, "dtype": a.dtype, "numel": a.numel, "storage_nbytes": a.storage_nbytes,
                             "side": miss.side, "nbytes": miss.nbytes, "element": a.element_of(address)}
    L.oob[(where, op)] = Finding("out_of_bounds", L.kernel, where, op, detail)


def _without(mask: Any, m: np.ndarray, bad: np.ndarray, tensor_handle: Any, int1: Any) -> Any:
    """``mask`` with the ``bad`` lanes off, of the kind it came as."""
    keep = m & ~bad
    if isinstance(mask, np.ndarray):
        return keep
    return tensor_handle(keep, getattr(mask, "dtype", int1) if mask is not None else int1)


def _finish(L: _Launch, builder_grid: tuple[int, int, int] | None, raising: bool) -> None:
    """End of a launch: record its findings (and its overlapping stores); fail or warn per the mode."""
    __tracebackhide__ = True
    st = L.state
    if L.extents is None:
        return
    st.launches += 1
    failing: list[Finding] = list(L.oob.values())
    grid = builder_grid or (1, 1, 1)
    for o in L.log.overlaps():
        owner = L.extents.owner(o.address)

        def pid(linear: int) -> list[int]:
            x, rest = linear % grid[0], linear // grid[0]
            return [x, rest % grid[1], rest // grid[1]]

        detail: dict[str, Any] = {"programs": [pid(o.programs[0]), pid(o.programs[1])], "address": o.address,
                                  "nbytes": o.nbytes, "other_where": L.where(o.sites[1])}
        if owner is not None:
            detail["argument"] = owner.name
            detail["element"] = (o.address - owner.data_ptr) // owner.element_size
        f = Finding("race" if o.racy else "overlap", L.kernel, L.where(o.sites[0]), "store", detail)
        if st.add(f) and o.racy:
            failing.append(f)
    for f in L.oob.values():
        st.add(f)
    if not failing or not raising or L.mode == "off":
        return
    failing.sort(key=lambda f: f.kind != "out_of_bounds")
    text = launch_message(failing, L.mode)
    if L.mode == "fail":
        raise SanitizerError(text)
    warnings.warn(SanitizerWarning(text), stacklevel=4)


def install(patch: Patch, state: State) -> bool:
    """Wrap the interpreter's launch and memory ops through ``patch`` for ``state``'s session. ``False`` (and
    ``state.unsupported`` says why, warned once) when this Triton's interpreter lacks what the hooks wrap."""
    from triton.runtime import interpreter as itp

    from harness.interp.shims import missing_methods

    problem = missing_methods(itp, NEEDED)
    if problem is not None:
        state.unsupported = (f"this Triton's interpreter is not understood ({problem}); loads, stores and atomics "
                             "are not checked")
        warnings.warn(f"harness sanitizer: {state.unsupported}", RuntimeWarning, stacklevel=2)
        return False
    B, G = itp.InterpreterBuilder, itp.GridExecutor
    TH = itp.TensorHandle
    int1 = itp.tl.int1
    call_orig, init_orig, restore_orig = G.__call__, G._init_args_hst, G._restore_args_dev
    load_orig, store_orig = B.create_masked_load, B.create_masked_store
    rmw_orig, cas_orig = B.create_atomic_rmw, B.create_atomic_cas

    def mine() -> _Launch | None:
        L = _CURRENT.get()
        return L if L is not None and L.state is state and L.extents is not None else None

    # The launch is opened where the interpreter copies the arguments to the host and closed where it copies them
    # back: methods no shim wraps, so a block that lifts a shim's launch wrapper (``Patch.lift``) is still checked.
    # ``__call__`` only closes a launch the kernel raised out of.
    def end(raising: bool) -> None:
        L = _CURRENT.get()
        if L is not None and L.state is state:
            _CURRENT.set(None)
            _finish(L, getattr(itp.interpreter_builder, "grid_dim", None), raising=raising)

    def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # a failure points at the kernel launch in the test, not at this wrapper
        try:
            return call_orig(self, *args, **kwargs)
        except BaseException:
            end(raising=False)
            raise

    def init_args_hst(self: Any, args_dev: Any, kwargs: Any) -> Any:
        end(raising=False)  # a launch that raised where no __call__ wrapper saw it: its findings are kept
        hst = init_orig(self, args_dev, kwargs)
        if _innermost() is state and state.effective_mode() != "off":
            L = _Launch(state, getattr(self.fn, "__qualname__", getattr(self.fn, "__name__", "?")))
            try:
                L.extents = Extents(_arguments(self.fn, hst[0], hst[1]))
            except _Unknown as e:
                L.skipped = str(e)
                state.note_skipped(L.kernel, L.skipped)
            _CURRENT.set(L)
        return hst

    def restore_args_dev(self: Any, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        out = restore_orig(self, *args, **kwargs)
        end(raising=True)
        return out

    def create_masked_load(self: Any, ptrs: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
        L = mine()
        if L is not None:
            _, m, bad = _check(L, self, L.atomic or "load", ptrs, mask)
            if bad.any():
                mask = _without(mask, m, bad, TH, int1)
        return load_orig(self, ptrs, mask, *rest, **kw)

    def create_masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
        L = mine()
        if L is not None:
            p, m, bad = _check(L, self, L.atomic or "store", ptrs, mask)
            if bad.any():
                mask = _without(mask, m, bad, TH, int1)
                m = m & ~bad
            if not L.atomic and self.grid_dim != (1, 1, 1) and m.any():
                gx, gy, _ = self.grid_dim
                x, y, z = self.grid_idx
                v = np.broadcast_to(np.asarray(value.data), p.shape)
                L.log.add(p[m].astype(np.uint64), v[m], x + gx * (y + gy * z), L.site()[0])
        return store_orig(self, ptrs, value, mask, *rest, **kw)

    def create_atomic_rmw(self: Any, rmwOp: Any, ptr: Any, val: Any, mask: Any, *rest: Any) -> Any:
        L = mine()
        if L is not None:
            name = str(rmwOp).rsplit(".", 1)[-1].lower()
            op = "atomic_" + _RMW_NAMES.get(name, name)
            _, m, bad = _check(L, self, op, ptr, mask)
            if bad.any():
                mask = _without(mask, m, bad, TH, int1)
        return rmw_orig(self, rmwOp, ptr, val, mask, *rest)

    def create_atomic_cas(self: Any, ptr: Any, cmp: Any, val: Any, *rest: Any) -> Any:
        L = mine()
        if L is not None:
            p, _, bad = _check(L, self, "atomic_cas", ptr, None)
            if bad.any():  # no mask to take the lane out: it acts on a scratch word instead
                safe = np.where(bad, np.uint64(L.scratch.ctypes.data), p.astype(np.uint64))
                ptr = TH(safe, ptr.dtype)
        return cas_orig(self, ptr, cmp, val, *rest)

    wraps = {(G, "__call__"): launch, (G, "_init_args_hst"): init_args_hst, (G, "_restore_args_dev"): restore_args_dev,
             (B, "create_masked_load"): create_masked_load, (B, "create_masked_store"): create_masked_store,
             (B, "create_atomic_rmw"): create_atomic_rmw, (B, "create_atomic_cas"): create_atomic_cas}
    for name in OPTIONAL:
        orig = getattr(B, name, None)
        if callable(orig):
            wraps[(B, name)] = _atomic_store(orig, mine)
    for (obj, name), fn in wraps.items():
        patch.setattr(obj, name, fn, tag=TAG)
    patch.setitem(_active, id(state), state, tag=TAG)
    return True


def _atomic_store(orig: Any, mine: Any) -> Any:
    """3.9's ``create_atomic_store``: the masked store it calls is checked as ``atomic_store`` and is no plain
    store of a race."""

    def create_atomic_store(self: Any, *args: Any, **kwargs: Any) -> Any:
        L = mine()
        if L is None:
            return orig(self, *args, **kwargs)
        L.atomic = "atomic_store"
        try:
            return orig(self, *args, **kwargs)
        finally:
            L.atomic = ""

    return create_atomic_store


def silence(patch: Patch, state: State) -> None:
    """Make ``state`` (mode off) the innermost sanitizer through ``patch`` without hooks of its own: the hooks of
    an enclosing session (a pytester run's outer one) step aside for this session's launches."""
    patch.setitem(_active, id(state), state, tag=TAG)
