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
  process never reads or writes memory it was not given, whatever the mode;
- bytes one program stores twice (:meth:`~harness.sanitize.races.StoreLog.repeats`) are judged, at the launch's
  end, against the compiled kernel of the session's arch (:mod:`harness.lowering.stores`: each store's thread
  per element, the barriers between stores): a race where two threads store different values with no barrier
  between. ``InterpretedFunction.run`` is wrapped only to keep the launch's kernel and arguments for that
  compile, which happens only for a launch with such a byte.

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
        #: the launch as ``InterpretedFunction.run`` got it (kernel, arguments, keywords): what the compiled
        #: kernel is specialized on, asked for only when a program stores a byte twice
        self.run: tuple[Any, tuple[Any, ...], dict[str, Any]] | None = None
        self.target = ""  # the CUDA arch whose compiled kernel judges stores inside one program ("": none)
        #: each logged store's origin: (interpreter position, block shape, site index) by origin id
        self.origins: dict[tuple[Any, tuple[int, ...]], int] = {}
        self.store_origin: list[int] = []

    def site(self) -> tuple[int, str, tuple[str, int, int] | None]:
        """The index and ``file:line`` of the kernel source line the interpreter is executing, and its position
        (:func:`harness.lowering.sites.interpreter_position`)."""
        from harness.lowering.sites import interpreter_position

        pos = interpreter_position()
        key = (_shown_path(pos[0]), pos[1]) if pos else ("?", 0)
        i = self.sites.setdefault(key, len(self.sites))
        return i, f"{key[0]}:{key[1]}", pos

    def origin(self, pos: tuple[str, int, int] | None, shape: tuple[int, ...], site: int) -> int:
        return self.origins.setdefault((pos, shape, site), len(self.origins))

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
_RUN: contextvars.ContextVar[tuple[Any, tuple[Any, ...], dict[str, Any]] | None] = contextvars.ContextVar(
    "harness_sanitize_run", default=None)
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
    _, where, _ = L.site()
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

    def pid(linear: int) -> list[int]:
        x, rest = linear % grid[0], linear // grid[0]
        return [x, rest % grid[1], rest // grid[1]]

    for o in L.log.overlaps():
        owner = L.extents.owner(o.address)
        detail: dict[str, Any] = {"programs": [pid(o.programs[0]), pid(o.programs[1])], "address": o.address,
                                  "nbytes": o.nbytes, "other_where": L.where(o.sites[1])}
        if owner is not None:
            detail["argument"] = owner.name
            detail["element"] = (o.address - owner.data_ptr) // owner.element_size
        f = Finding("race" if o.racy else "overlap", L.kernel, L.where(o.sites[0]), "store", detail)
        if st.add(f) and o.racy:
            failing.append(f)
    if raising:
        try:
            within = _within(L, pid)
        except Exception as e:  # noqa: BLE001 - a check that cannot judge never fails the launch
            L.state.note_unjudged(L.kernel, f"the check failed ({type(e).__name__}: {e})")
            within = []
        for f in within:
            if st.add(f) and f.kind == "race":
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


def _compiled_stores(L: _Launch) -> tuple[Any, str]:
    """The launch's :class:`harness.lowering.stores.StoreFacts` for ``L.target``, or ``None`` and why not."""
    from harness.lowering.compiled import specialize
    from harness.lowering.stores import stores_for

    if not L.target:
        return None, "the assumed arch is not a CUDA arch: no compiled kernel to read the threads from"
    if L.run is None:
        return None, "the launch's kernel and arguments were not seen (no InterpretedFunction.run)"
    fn, args, kwargs = L.run
    try:
        spec = specialize(fn, args, kwargs)
        facts = stores_for(fn, spec.signature, spec.constexprs, num_warps=spec.num_warps, arch=L.target,
                           fp_fusion=spec.fp_fusion, divisible=spec.divisible, options=spec.options)
    except Exception as e:  # noqa: BLE001 - no compiled kernel means not judged, never a failed launch
        return None, f"its compiled kernel for {L.target} could not be had ({type(e).__name__}: {e})"
    if facts.error:
        return None, f"for {L.target}, the kernel {facts.error}"
    return facts, ""


def _same_shape(compiled: tuple[int, ...], interpreted: tuple[int, ...]) -> bool:
    """A compiled store's tensor shape against the interpreter's block (which holds a scalar as one element)."""
    return compiled == interpreted or (compiled == () and int(np.prod(interpreted)) == 1)


def _within(L: _Launch, pid: Any) -> list[Finding]:
    """Bytes one program stored twice, judged against the compiled kernel (:mod:`harness.lowering.stores`): a race
    where the two stores' threads differ, no barrier orders them and the values differ; a benign overlap where the
    values agree. What cannot be judged is noted once per kernel (:meth:`State.note_unjudged`)."""
    rep = L.log.repeats()
    if rep is None:
        return []
    facts, why = _compiled_stores(L)
    if facts is None:
        L.state.note_unjudged(L.kernel, why)
        return []
    origin = np.asarray(L.store_origin, dtype=np.int64)
    keys = {v: k for k, v in L.origins.items()}
    o0, o1 = origin[rep.stores[0]], origin[rep.stores[1]]
    one = rep.stores[0] == rep.stores[1]  # two elements of one store: no barrier can lie between its threads
    group = (o0 << 32) | (o1 << 1) | one
    tpw = facts.threads_per_warp
    found: list[Finding] = []
    for g in np.unique(group):
        rows = np.flatnonzero(group == g)
        a, b, same = int(g) >> 32, (int(g) >> 1) & 0x7FFFFFFF, bool(g & 1)
        (pa, shape_a, site_a), (pb, shape_b, site_b) = keys[a], keys[b]
        sa, sb = facts.site_at(pa), facts.site_at(pb)
        wa, wb = L.where(site_a), L.where(site_b)
        if sa is None or sb is None:
            L.state.note_unjudged(L.kernel, f"no store of the compiled kernel is at {wa if sa is None else wb}")
            continue
        if not (_same_shape(sa.shape, shape_a) and _same_shape(sb.shape, shape_b)):
            L.state.note_unjudged(L.kernel, f"the compiled store at {wa} or {wb} has another shape than the "
                                            "interpreter's")
            continue
        ta, tb = facts.threads(sa), facts.threads(sb)
        if ta is None or tb is None:
            bad = sa if ta is None else sb
            L.state.note_unjudged(L.kernel, f"the layout of the store at {wa if ta is None else wb} is not "
                                            f"modelled ({bad.error or 'not one thread per element'})")
            continue
        t0, t1 = ta[rep.elements[0][rows]], tb[rep.elements[1][rows]]
        apart = t0 != t1
        if not apart.any():
            continue  # the same thread stores both: program order
        order = False if same else facts.ordered(sa, sb)
        if order is None:
            L.state.note_unjudged(L.kernel, f"whether a barrier orders the stores at {wa} and {wb} is not judged "
                                            "(a loop, a branch, or one position with several stores)")
            continue
        if order:
            continue
        racy = apart & rep.differ[rows]
        hit = racy if racy.any() else apart
        first = int(rows[np.flatnonzero(hit)[0]])
        k = int(np.flatnonzero(hit)[0])
        address = int(rep.address[first])
        owner = L.extents.owner(address) if L.extents is not None else None
        detail: dict[str, Any] = {"program": pid(int(rep.program[first])), "address": address,
                                  "nbytes": int(np.unique(rep.address[rows[hit]]).size) * rep.width,
                                  "other_where": wb,
                                  "threads": [[int(t0[k]) // tpw, int(t0[k]) % tpw],
                                              [int(t1[k]) // tpw, int(t1[k]) % tpw]],
                                  "arch": facts.arch, "triton": facts.triton}
        if owner is not None:
            detail["argument"] = owner.name
            detail["element"] = (address - owner.data_ptr) // owner.element_size
        found.append(Finding("race" if racy.any() else "overlap", L.kernel, wa, "store", detail))
    return found


def install(patch: Patch, state: State, arch: Any = "sm90") -> bool:
    """Wrap the interpreter's launch and memory ops through ``patch`` for ``state``'s session. ``False`` (and
    ``state.unsupported`` says why, warned once) when this Triton's interpreter lacks what the hooks wrap.
    ``arch``: the session's assumed arch; its compiled kernel (a CUDA arch; sm90 for the interpreter's own)
    judges the stores one program makes to the same bytes."""
    from triton.runtime import interpreter as itp

    from harness.arch import parse_arch
    from harness.interp.casts import target_for
    from harness.interp.shims import missing_methods

    problem = missing_methods(itp, NEEDED)
    if problem is not None:
        state.unsupported = (f"this Triton's interpreter is not understood ({problem}); loads, stores and atomics "
                             "are not checked")
        warnings.warn(f"harness sanitizer: {state.unsupported}", RuntimeWarning, stacklevel=2)
        return False
    a = parse_arch(arch) if arch is not None else None
    target = "" if a is not None and a.kind == "rocm" else target_for(a).name
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
            L.run, L.target = _RUN.get(), target
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
            if not L.atomic and m.any():
                gx, gy, _ = self.grid_dim
                x, y, z = self.grid_idx
                v = np.broadcast_to(np.asarray(value.data), p.shape)
                site, _, pos = L.site()
                L.store_origin.append(L.origin(pos, p.shape, site))
                L.log.add(p[m].astype(np.uint64), v[m], x + gx * (y + gy * z), site, m)
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
    run_orig = getattr(itp.InterpretedFunction, "run", None)
    if callable(run_orig):
        wraps[(itp.InterpretedFunction, "run")] = _run(run_orig)
    for name in OPTIONAL:
        orig = getattr(B, name, None)
        if callable(orig):
            wraps[(B, name)] = _atomic_store(orig, mine)
    for (obj, name), fn in wraps.items():
        patch.setattr(obj, name, fn, tag=TAG)
    patch.setitem(_active, id(state), state, tag=TAG)
    return True


def _run(orig: Any) -> Any:
    """``InterpretedFunction.run``: the kernel and arguments of the launch it starts, for :func:`_compiled_stores`
    (the grid executor sees only the rewritten function)."""

    def run(self: Any, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> Any:
        token = _RUN.set((self, args, kwargs))
        try:
            return orig(self, *args, grid=grid, warmup=warmup, **kwargs)
        finally:
            _RUN.reset(token)

    return run


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
