"""Interpreter shim: fp contraction, reductions and scans as the compiled kernel computes them (issue 38).

Why: the interpreter rounds ``a * b + c`` twice and adds a ``tl.sum`` / ``tl.cumsum`` in numpy's order, while the
GPU runs what Triton's compiler made of them: LLVM contracts a product fed into an add into one ``fma``, and a
reduction or scan combines in the order its layout and Triton's lowering dictate. :mod:`harness.lowering` reads
both from the launch's compiled kernel (per Triton version, ``num_warps``, arch, argument alignment) and evaluates
them in numpy; this shim asks it once per launch and computes each matched op that way:

- the launch (``InterpretedFunction.run``, the one call every interpreted launch makes, with the arguments as
  given) gets its facts (:func:`harness.lowering.compiled.specialize` + :func:`~harness.lowering.compiled.lowering_for`,
  cached in memory and on disk) *before* the interpreter patches ``triton.language`` for the grid, since a
  compile under that patch fails;
- ``create_fmul`` tags its result with the multiply's source position and factors; ``create_fadd`` /
  ``create_fsub`` whose position and tagged operand are a fused pair of the facts compute one ``fma``
  (:func:`harness.lowering.numeric.fma`); a pair the compiler left apart keeps the interpreter's two roundings,
  which is what the GPU computes then;
- an add of a loop whose previous iteration's multiply ptxas contracted into it (the facts' ``carried``: the
  multiply tags its result, the add reads the iteration and trip count from the kernel's frame,
  :func:`harness.lowering.sites.loop_iteration`) computes one ``fma`` where that iteration is not the first of its
  unrolled block (:func:`harness.lowering.fma.unrolled_position`);
- ``ReduceOps.apply_impl`` / ``ScanOps.apply_impl`` at a position the facts know combine in the compiled order
  (:func:`harness.lowering.reduce_order.reduce`, :func:`harness.lowering.scan_order.scan`), a sum of products
  with the in-thread fma the compiler made. The combine is the compiled one (``tt.reduce``'s region), so a user
  combine that lowers to ``arith.addf`` is modelled like ``tl.sum``.

What it cannot model keeps warning through :mod:`harness.interp.differences`, with the reason: no compiled
kernel for the target, lines where ptxas contracted beyond the PTX in a way not read (a loop whose unrolling or
iteration cannot be read among them), reverse scans, layouts the order model does
not read (MMA / dot operands), a fused product the interpreter could not trace (broadcast or converted between
the multiply and the add). A failure inside the shim costs one warning and the interpreter's own op, never the
launch. ``bf16`` 16-bit packed reductions (Triton 3.9) are derived from sm90's PTX only: other targets keep the
interpreter's order for them, with a warning.

It sits on top of :mod:`harness.interp.arith` (installed after it): what it does not model goes to the methods
it replaced, arith's bf16 reductions included.
"""

from __future__ import annotations

import contextlib
import contextvars
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.interp import differences
from harness.interp.patch import Patch, lift
from harness.interp.patch import installed as patch_installed
from harness.interp.shims import missing_methods
from harness.lowering import numeric
from harness.lowering.fma import unrolled_position
from harness.lowering.sites import interpreter_position, loop_iteration

__all__ = ["MODELLED", "TAG", "applies_to", "install", "installed", "suspended"]

#: The tag of this shim's records in the patch layer (:mod:`harness.interp.patch`).
TAG = "lowering"
#: The :data:`harness.interp.differences.KNOWN_DIFFERENT` rows this shim models: their warnings come from it,
#: with the reason, wherever it cannot.
MODELLED = (("fma_contraction", ("*",)), ("sum", ("fp32", "bf16", "fp16")), ("scan", ("fp32", "bf16", "fp16")))

_DTYPES = ("fp32", "bf16", "fp16")
_ELEM = {"f32": "fp32", "bf16": "bf16", "f16": "fp16", "float": "fp32", "bfloat": "bf16", "half": "fp16"}
_PRODUCT = "harness_lowering_product"  # TensorHandle.attr key: (mul position or None, lhs data, rhs data[, _MASKED])
_MASKED = "masked"  # the product's tag came through tl.where(mask, product, 0)
_QUOTIENT = "harness_lowering_quotient"  # TensorHandle.attr key: a _Quotient
_CARRIED = "harness_lowering_carried"  # TensorHandle.attr key: (mul position, lhs data, rhs data) of a loop's multiply
_SCAN_KINDS = ("add", "mul", "max", "min")
#: the arch the 16-bit packed reduction order (Triton 3.9) was derived on (harness.lowering.reduce_order)
_PACKED_ARCH = "sm90"


def applies_to(arch: Any) -> bool:
    """Whether the shim models ``arch``'s lowering: CUDA targets (the compiler gives their kernels) and the
    interpreter's own arch (judged as sm90); not ROCm, whose lowering is not read."""
    return getattr(arch, "kind", None) != "rocm"


@dataclass
class _Launch:
    """One interpreted launch: its facts (``None`` with ``why`` when there are none) and the lookups by position."""

    kernel: str
    arch: str
    facts: Any = None
    why: str = ""
    mul_keys: frozenset = frozenset()
    by_add: dict = field(default_factory=dict)
    reductions: dict = field(default_factory=dict)
    scans: dict = field(default_factory=dict)
    warned: bool = False
    #: contracted ``a ± x / y`` results by (op, side, quotient tag, other operand's data), with those objects kept
    #: alive: the same expression elsewhere in the kernel is the same value in the compiled one (LLVM's GVN)
    contracted: dict = field(default_factory=dict)
    #: loop-carried pairs ptxas contracts (:class:`harness.lowering.compiled.Carried`) by add position, and their
    #: multiplies' positions
    carried: dict = field(default_factory=dict)
    carried_muls: frozenset = frozenset()
    quotient_lines: frozenset = frozenset()


_CURRENT: contextvars.ContextVar[_Launch | None] = contextvars.ContextVar("harness_lowering_launch", default=None)


def _launch_for(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], arch: str) -> _Launch:
    from harness.lowering.compiled import lowering_for, specialize

    name = getattr(getattr(fn, "fn", fn), "__qualname__", "?")
    launch = _Launch(name, arch)
    try:
        spec = specialize(fn, args, kwargs)
        facts = lowering_for(fn, spec.signature, spec.constexprs, num_warps=spec.num_warps, arch=arch,
                             fp_fusion=spec.fp_fusion, divisible=spec.divisible, options=spec.options)
    except Exception as e:  # noqa: BLE001 - no facts is the interpreter's behaviour, never a failed launch
        launch.why = f"the launch's compiled kernel for {arch} could not be had ({type(e).__name__}: {e})"
        return launch
    if facts.error:
        launch.why = f"for {arch}, the kernel {facts.error}"
        return launch
    launch.facts = facts
    launch.mul_keys = frozenset(f.mul for f in facts.fused if f.mul is not None)
    for f in facts.fused:
        if f.add is not None:
            launch.by_add.setdefault(f.add, []).append(f)
    launch.quotient_lines = frozenset(facts.quotient_lines)
    launch.carried = {c.add: c for c in facts.carried if c.add is not None and c.mul is not None}
    launch.carried_muls = frozenset(c.mul for c in launch.carried.values())
    for r in facts.reductions:
        launch.reductions.setdefault(r.where, []).append(r)
    for s in facts.scans:
        launch.scans.setdefault(s.where, []).append(s)
    return launch


def _warn_once_per_kernel(launch: _Launch) -> None:
    """At the launch's first op (inside the grid: the warning names the kernel): what its facts leave unmodelled
    as a whole."""
    if launch.warned:
        return
    launch.warned = True
    if launch.facts is None:
        differences.warn("lowering", "*", f"{launch.why}: fma contraction, reduction and scan order stay the "
                                          "interpreter's")
        return
    unmodelled = launch.facts.unmodelled_ptxas_lines()
    if unmodelled:
        lines = ", ".join(f"{f.rsplit('/', 1)[-1]}:{n}" for f, n in unmodelled)
        differences.warn("fma_contraction", "fp32",
                         f"ptxas contracts a multiply and an add the PTX keeps apart at {lines} (its own choice per "
                         "unrolled instruction, harness.lowering.fma.ptxas_contracted_lines): not modelled there")


def _failed(what: str, e: BaseException) -> None:
    differences.warn("lowering", "*", f"the lowering shim failed on {what} ({type(e).__name__}: {e}); the "
                                      "interpreter's own op computes it")


def _nan_as_interpreter(model: Any, interp: Any) -> Any:
    """``model``'s handle with the interpreter's bits wherever both are NaN. Why: numpy keeps NaN payloads and
    :mod:`harness.lowering.numeric` writes the canonical NaN; which payload the GPU gives is not measured here, and
    a kernel compared with another kernel's interpreter output (or an interpreter-lane golden) must not change
    its NaN bits because one of them had a fused pair or a reduction this shim computes. 16-bit bf16 is left
    alone (arith canonicalizes it too)."""
    a = np.asarray(model.data)
    if a.dtype.kind != "f":
        return model
    nan = np.isnan(a)
    if not nan.any():
        return model
    b = np.broadcast_to(np.asarray(interp.data), a.shape)
    keep = nan & np.isnan(b)
    if keep.any():
        model.data = np.where(keep, b, a).astype(a.dtype)
    return model


def _nan_like_interpreter(out: list[Any], interpreter: Any) -> list[Any]:
    """:func:`_nan_as_interpreter` for the tensors a reduction or scan returns; the interpreter's own op runs only
    when a float result holds a NaN."""
    if not any(np.asarray(t.handle.data).dtype.kind == "f" and np.isnan(t.handle.data).any() for t in out):
        return out
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = interpreter()
    except Exception:  # noqa: BLE001 - e.g. np.nanargmax of an all-NaN row: the model's result stands
        return out
    theirs = list(theirs) if isinstance(theirs, (list, tuple)) else [theirs]
    for t, u in zip(out, theirs, strict=False):
        _nan_as_interpreter(t.handle, u.handle)
    return out


def _neg(x: np.ndarray, dtype: str) -> np.ndarray:
    x = np.asarray(x)
    if dtype == "bf16":
        return (x ^ np.uint16(0x8000)).astype(np.uint16)
    return -x


def _fused(launch: _Launch, op: str, lhs: Any, rhs: Any, tags: tuple[Any, Any]) -> Any:
    """The fma of a fused pair at this add, or ``None`` for the interpreter's own add."""
    dt = differences.dtype_name(lhs.dtype)
    if dt not in _DTYPES:
        return None
    if launch.facts is None:
        differences.warn("fma_contraction", dt, f"a product fed into {'+' if op == 'fadd' else '-'}: {launch.why}; "
                                                "two roundings here, one where the GPU compiler contracts")
        return None
    pairs = launch.by_add.get(interpreter_position()) if launch.by_add else None
    if not pairs:
        return None  # the compiled kernel keeps this add apart: the interpreter's two roundings are the GPU's
    for f in pairs:
        if f.op != op or _ELEM.get(f.elem) != dt:
            continue
        # fadd commutes (LLVM may list the product on either side of the source's +); fsub does not
        sides = (f.operand, 1 - f.operand) if op == "fadd" else (f.operand,)
        side = next((k for k in sides if tags[k] is not None and tags[k][0] == f.mul), None)
        if side is None:
            continue
        a, b = tags[side][1], tags[side][2]
        c = (rhs if side == 0 else lhs).data
        if op == "fsub":  # fsub(a*b, c) = fma(a, b, -c); fsub(c, a*b) = fma(-a, b, c)
            a, c = (a, _neg(c, dt)) if side == 0 else (_neg(a, dt), c)
        out = numeric.fma(a, b, c, dt)
        return type(lhs)(np.asarray(out), lhs.dtype)
    where = pairs[0].add
    other = {_ELEM.get(f.elem) for f in pairs} - {dt}
    if other:
        differences.warn("fma_contraction", dt, f"the compiled kernel computes the {op} at line {where[1]} in "
                                                f"{'/'.join(sorted(map(str, other)))}, the interpreter in {dt} (their "
                                                "type promotion differs): not modelled")
        return None
    differences.warn("fma_contraction", dt, f"the compiled kernel contracts the {op} at line {where[1]} with a "
                                            "product the interpreter could not trace to it (converted or broadcast "
                                            "in between): two roundings here, one on the GPU")
    return None


class _Quotient:
    """A division's operands, and on first use ``div.full.f32``'s factors as its closing multiply sees them
    (:func:`harness.interp.approx_math.div_full_operands_numpy`). Lazy: a quotient that meets no add ptxas
    contracted it into costs nothing."""

    __slots__ = ("_ops", "_factors")

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self._ops: tuple[np.ndarray, np.ndarray] | None = (x, y)
        self._factors: tuple[np.ndarray, np.ndarray] | None = None

    def factors(self) -> tuple[np.ndarray, np.ndarray]:
        if self._factors is None:
            from harness.interp import approx_math

            self._factors, self._ops = approx_math.div_full_operands_numpy(*self._ops), None  # type: ignore[misc]
        return self._factors


def _contracted_quotient(launch: _Launch, op: str, lhs: Any, rhs: Any) -> Any:
    """``a ± x / y`` where ptxas contracted the quotient's multiply into this add (fp32, a line of the facts'
    ``quotient_lines``): ``fma(x', rcp(y'), ±a)`` with one rounding; ``None`` elsewhere."""
    if launch.facts is None or not launch.facts.quotient_lines or differences.dtype_name(lhs.dtype) != "fp32":
        return None
    tags = (lhs.attr.get(_QUOTIENT), rhs.attr.get(_QUOTIENT))
    side = 0 if tags[0] is not None else 1 if tags[1] is not None else None
    if side is None:
        return None
    other = (rhs if side == 0 else lhs).data
    key = (op, side, id(tags[side]), id(other))
    seen = launch.contracted.get(key)
    if seen is not None:
        return type(lhs)(seen[0], lhs.dtype)
    where = interpreter_position()
    if where is None or (where[0], where[1]) not in launch.quotient_lines:
        return None
    xs, r = tags[side].factors()
    c = np.asarray(other, np.float32)
    if op == "fsub":  # q - c = fma(x', r, -c); c - q = fma(-x', r, c)
        xs, c = (xs, -c) if side == 0 else (-xs, c)
    out = np.asarray(numeric.fma(np.broadcast_to(xs, np.broadcast_shapes(xs.shape, c.shape)), r, c, "fp32"),
                     np.float32)
    launch.contracted[key] = (out, tags[side], other)
    return type(lhs)(out, lhs.dtype)


def _carried(launch: _Launch, op: str, lhs: Any, rhs: Any) -> Any:
    """The add of a loop iteration that ptxas contracted with the previous iteration's multiply (a pair of the
    facts' ``carried``): ``fma`` of that multiply's factors and the other operand where the iteration is not the
    first of its unrolled block (:func:`harness.lowering.fma.unrolled_position`); ``None`` elsewhere."""
    if differences.dtype_name(lhs.dtype) != "fp32":
        return None
    it = loop_iteration()  # the position with it: one walk of the stack
    c = launch.carried.get(interpreter_position() if isinstance(it, str) else it[0])
    if c is None:
        return None
    tags = (lhs.attr.get(_CARRIED), rhs.attr.get(_CARRIED))
    sides = (c.operand, 1 - c.operand) if op == "fadd" else (c.operand,)
    side = next((k for k in sides if tags[k] is not None and tags[k][0] == c.mul), None)
    if side is None:
        return None
    if isinstance(it, str):
        differences.warn("fma_contraction", "fp32", f"ptxas contracts the {op} at line {c.add[1]} with the previous "
                                                    f"iteration's multiply in unrolled blocks of {c.unroll}, but {it}: "
                                                    "not modelled there")
        return None
    if unrolled_position(it[1], it[2], c.unroll) == 0:
        return None  # the first add of an unrolled block: FADD, after the previous block's FMUL
    a, b = tags[side][1], tags[side][2]
    other = (rhs if side == 0 else lhs).data
    if op == "fsub":  # fsub(a*b, c) = fma(a, b, -c); fsub(c, a*b) = fma(-a, b, c)
        a, other = (a, -np.asarray(other)) if side == 0 else (-np.asarray(a), other)
    return type(lhs)(numeric.fma(a, b, other, "fp32"), lhs.dtype)  # broadcasts as the interpreter's add would


def _one(found: list[Any], shape: tuple[int, ...], axis: int) -> tuple[Any, str]:
    """The single fact of ``found`` for an op on ``shape`` along ``axis`` (from the front, as the compiled op's), or
    why there is none."""
    fits = [r for r in found if r.axis == axis]
    if not fits:
        return None, "the compiled kernel has no such op along this axis"
    usable = [r for r in fits if r.bits is not None and r.bits.size == shape[axis]]
    if not usable:
        return None, fits[0].error or "its compiled layout does not cover this block"
    if len({(r.kind, r.bits, getattr(r, "reverse", False)) for r in usable}) > 1:
        return None, "the compiled kernel has several such ops at this position, with different orders"
    return usable[0], ""


def _reduce(launch: _Launch, ops: Any, inputs: tuple[Any, ...], arch: str) -> Any:
    from harness.lowering import reduce_order

    first = inputs[0]
    dt = differences.dtype_name(first.dtype)
    if dt not in _DTYPES:
        return None
    data = first.handle.data
    axis = ops.axis
    sums = ops.combine_fn is _sum_combine()

    def keep(why: str) -> None:
        if sums:
            differences.warn("sum", dt, f"{why}: the interpreter adds in numpy's order, the GPU in its layout's")
        return None

    if launch.facts is None:
        return keep(launch.why)
    if axis is None:
        if data.ndim != 1:
            return keep("a reduction over all axes (axis=None) reshapes with can_reorder: its order is not modelled")
        axis = 0
    elif -data.ndim <= axis < 0:  # tl.sum(x, axis=-1): the compiled op's axis counts from the front
        axis += data.ndim
    r, why = _one(launch.reductions.get(interpreter_position(), []), data.shape, axis)
    if r is None:
        return keep(why)
    if r.kind not in reduce_order.COMBINES or _ELEM.get(r.elem) != dt:
        return keep(f"the compiled combine is {r.kind} on {r.elem}: not modelled")
    arity = 2 if r.kind in ("argmax", "argmin") else 1
    if len(inputs) != arity:
        return keep(f"{r.kind} of {len(inputs)} operands: not modelled")
    rule = reduce_order.rule_for(launch.facts.triton)
    plan = reduce_order.ReducePlan(r.bits, rule)
    if plan.packed(dt, r.kind) and arch != _PACKED_ARCH:
        return keep(f"Triton {launch.facts.triton} packs 16-bit reductions in pairs; that order is derived from "
                    f"{_PACKED_ARCH}'s PTX, not {arch}'s")
    factors, fused_steps = None, None
    fused = [f for f in launch.by_add.get(r.where, ()) if f.mul is not None]
    if fused and r.kind == "add":
        tag = first.handle.attr.get(_PRODUCT)
        if tag is None or tag[0] not in {f.mul for f in fused}:
            return keep("the compiled kernel fuses this sum's adds with a product the interpreter could not trace")
        factors = tuple(np.broadcast_to(np.asarray(t), data.shape) for t in (tag[1], tag[2]))
        if len(tag) > 3:  # through tl.where: LLVM folds the selects only where one mask covers the first adds
            count = sum(f.count for f in fused if f.mul == tag[0])
            if rule.thread == "sequential":  # 3.6: the first `count` adds of the fold (one vector's mask)
                fused_steps = tuple(i < count for i in range(plan.thread_combines()))
            elif count != (1 << len(r.bits.registers)) // 2:  # 3.9: the tree's first level, pairs of one mask
                return keep(f"Triton {launch.facts.triton} sums a masked product in its in-thread tree with {count} "
                            "fused adds, not its first level: not modelled")
    if factors is not None and r.thread_fma is not None and rule.thread == "sequential" and not plan.packed(dt, r.kind):
        fused_steps = r.thread_fma  # which in-thread adds the compiled kernel contracts
    values = (data, inputs[1].handle.data) if arity == 2 else data
    if r.reorder is not None:  # the registers as the reshape before the op left them (compiled.reorder_of)
        if arity == 2:
            return keep("an index reduction over a reordering reshape: which index each value is paired with is "
                        "not modelled")
        perm = np.asarray(r.reorder)
        values = np.take(values, perm, axis)
        if factors is not None:
            factors = tuple(np.take(f, perm, axis=axis) for f in factors)
    sides = r.sides if factors is not None and r.reorder is None else None
    res = reduce_order.reduce(values, axis, plan, r.kind, dt, factors=factors, sides=sides,
                              fused_steps=fused_steps)
    out = []
    for arr, inp in zip(res, inputs, strict=True):
        arr = np.asarray(arr)
        if ops.keep_dims:
            arr = np.expand_dims(arr, axis) if ops.axis is not None else arr.reshape((1,) * data.ndim)
        elif ops.axis is None:
            arr = arr[()]
        out.append(ops.to_tensor(arr, inp.dtype))
    return out


def _scan(launch: _Launch, ops: Any, inputs: tuple[Any, ...]) -> Any:
    from harness.lowering import scan_order

    first = inputs[0]
    dt = differences.dtype_name(first.dtype)
    if dt not in _DTYPES or len(inputs) != 1:
        return None

    def keep(why: str) -> None:
        differences.warn("scan", dt, f"{why}: the interpreter scans sequentially, the GPU in its lowering's order")
        return None

    if launch.facts is None:
        return keep(launch.why)
    if ops.reverse:
        return keep("reverse scans are not modelled (harness.lowering.scan_order)")
    data = first.handle.data
    axis = ops.axis + data.ndim if -data.ndim <= ops.axis < 0 else ops.axis
    s, why = _one(launch.scans.get(interpreter_position(), []), data.shape, axis)
    if s is None:
        return keep(why)
    if s.kind not in _SCAN_KINDS or _ELEM.get(s.elem) != dt:
        return keep(f"the compiled combine is {s.kind} on {s.elem}: not modelled")
    if launch.by_add.get(s.where):
        return keep("the compiled kernel contracts this scan's adds with a product: not modelled")
    try:
        p = scan_order.plan(s.bits, s.reverse)
    except ValueError as e:
        return keep(str(e))
    return [ops.to_tensor(scan_order.scan(data, axis, p, s.kind, dt), first.dtype)]


def _sum_combine() -> Any:
    import triton.language as tl

    return tl.standard._sum_combine


def _problem(itp: Any) -> str | None:
    need = {"InterpretedFunction": ("run",), "InterpreterBuilder": ("create_fmul", "create_fadd", "create_fsub"),
            "ReduceOps": ("apply_impl", "to_tensor"), "ScanOps": ("apply_impl", "to_tensor")}
    return missing_methods(itp, need)


def install(patch: Patch, arch: Any = "sm90") -> bool:
    """Compute fp contraction, reductions and scans as ``arch``'s compiled kernel does (an
    :class:`harness.arch.Arch` or name of a CUDA target), through ``patch``, and mark the rows it models
    (:data:`MODELLED`). ``False`` after one warning when this Triton's interpreter is not understood."""
    from triton.runtime import interpreter as itp

    problem = _problem(itp)
    if problem is not None:
        warnings.warn(f"harness.interp.lowering: this Triton's interpreter is not understood ({problem}); fma "
                      "contraction, reductions and scans keep the interpreter's order", RuntimeWarning, stacklevel=2)
        return False
    name = getattr(arch, "name", arch)
    B = itp.InterpreterBuilder
    run_orig = itp.InterpretedFunction.run
    fmul_orig = B.create_fmul
    select_orig = B.create_select
    fdiv_orig = B.create_fdiv
    reduce_orig, scan_orig = itp.ReduceOps.apply_impl, itp.ScanOps.apply_impl

    def run(self: Any, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> Any:
        if warmup:
            return run_orig(self, *args, grid=grid, warmup=warmup, **kwargs)
        try:
            launch = _launch_for(self, args, kwargs, name)
        except Exception as e:  # noqa: BLE001
            launch = _Launch(getattr(self.fn, "__qualname__", "?"), name, why=f"{type(e).__name__}: {e}")
        token = _CURRENT.set(launch)
        try:
            return run_orig(self, *args, grid=grid, warmup=warmup, **kwargs)
        finally:
            _CURRENT.reset(token)

    def create_fmul(self: Any, lhs: Any, rhs: Any) -> Any:
        out = fmul_orig(self, lhs, rhs)
        launch = _CURRENT.get()
        if launch is None:
            return out
        _warn_once_per_kernel(launch)
        if launch.facts is None:
            out.attr[_PRODUCT] = (None, lhs.data, rhs.data)
        elif launch.mul_keys or launch.carried_muls:
            try:
                key = interpreter_position()
            except Exception as e:  # noqa: BLE001
                _failed("a multiply", e)
                return out
            if key in launch.mul_keys:
                out.attr[_PRODUCT] = (key, lhs.data, rhs.data)
            if key in launch.carried_muls:
                out.attr[_CARRIED] = (key, lhs.data, rhs.data)
        return out

    def create_fdiv(self: Any, lhs: Any, rhs: Any) -> Any:
        out = fdiv_orig(self, lhs, rhs)
        launch = _CURRENT.get()
        if launch is not None and launch.facts is not None and launch.facts.quotient_lines and \
                np.asarray(out.data).dtype == np.float32:
            out.attr[_QUOTIENT] = _Quotient(lhs.data, rhs.data)
        return out

    create_fdiv.__wrapped__ = fdiv_orig  # type: ignore[attr-defined]  # approximate math, when on, stays in effect

    def create_select(self: Any, cond: Any, lhs: Any, rhs: Any) -> Any:
        """``tl.where(mask, a * b, 0)`` keeps the product's tag, its factors zeroed where the mask is off: a sum
        over it whose compiled adds take the product (LLVM folds the selects of one mask out of the sum's first
        adds, then contracts them; read from Triton 3.6's LLIR of FlagGems' layer_norm) is then the fma of the
        unmasked factors, and adds +0 where masked (fma(0, 0, acc) = acc + 0)."""
        out = select_orig(self, cond, lhs, rhs)
        tag = lhs.attr.get(_PRODUCT)
        if tag is not None and _CURRENT.get() is not None:
            other = np.asarray(rhs.data)
            if other.dtype.kind == "f" and not (other != 0).any() and not np.signbit(other).any():
                c = np.asarray(cond.data).astype(bool)
                zero = np.zeros((), dtype=np.asarray(tag[1]).dtype)
                out.attr[_PRODUCT] = (tag[0], np.where(c, tag[1], zero), np.where(c, tag[2], zero), _MASKED)
        return out

    def carries_quotient(method: str) -> Any:
        """``create_splat``/``create_broadcast`` keeping a quotient's tag: ``x - tl.sum(x) / N`` broadcasts the
        quotient before the subtract (the tag's arrays broadcast against the other operand when used)."""
        orig = getattr(B, method)

        def fn(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = orig(self, *args, **kwargs)
            launch = _CURRENT.get()
            if launch is None or not launch.quotient_lines:
                return out  # no quotient of this kernel is contracted: no tag to carry
            tagged = [a for a in (*args, *kwargs.values()) if _QUOTIENT in getattr(a, "attr", ())]
            if tagged:
                out.attr[_QUOTIENT] = tagged[0].attr[_QUOTIENT]
            return out

        fn.__name__ = fn.__qualname__ = method
        return fn

    def add_like(op: str) -> Any:
        orig = getattr(B, f"create_{op}")

        def fn(self: Any, lhs: Any, rhs: Any) -> Any:
            launch = _CURRENT.get()
            if launch is not None:
                tags = (lhs.attr.get(_PRODUCT), rhs.attr.get(_PRODUCT))
                # the first model that applies and computes: a loop-carried product, a contracted quotient,
                # a fused product; each failure is said and the interpreter's own op runs
                models = []
                if launch.carried and (_CARRIED in lhs.attr or _CARRIED in rhs.attr):
                    models.append(lambda: _carried(launch, op, lhs, rhs))
                if tags == (None, None) and (_QUOTIENT in lhs.attr or _QUOTIENT in rhs.attr):
                    models.append(lambda: _contracted_quotient(launch, op, lhs, rhs))
                if tags != (None, None):
                    models.append(lambda: _fused(launch, op, lhs, rhs, tags))
                for model in models:
                    try:
                        out = model()
                    except Exception as e:  # noqa: BLE001
                        _failed(f"an {op}", e)
                        out = None
                    if out is not None:
                        if out.data.dtype.kind == "f" and np.isnan(out.data).any():
                            return _nan_as_interpreter(out, orig(self, lhs, rhs))
                        return out
            return orig(self, lhs, rhs)

        fn.__name__ = fn.__qualname__ = f"create_{op}"
        return fn

    def along_axis(what: str, model: Any, orig: Any) -> Any:
        """``ReduceOps`` / ``ScanOps.apply_impl`` computing in the compiled order (``model``), else ``orig``."""

        def apply_impl(self: Any, input: Any) -> Any:  # noqa: A002 - Triton's own name
            launch = _CURRENT.get()
            if launch is not None:
                _warn_once_per_kernel(launch)
                try:
                    out = model(launch, self, tuple(input))
                except Exception as e:  # noqa: BLE001
                    _failed(what, e)
                    out = None
                if out is not None:
                    return _nan_like_interpreter(out, lambda: orig(self, input))
            return orig(self, input)

        return apply_impl

    reduce_impl = along_axis("a reduction", lambda launch, ops, inputs: _reduce(launch, ops, inputs, name),
                             reduce_orig)
    scan_impl = along_axis("a scan", _scan, scan_orig)

    patch.setattr(itp.InterpretedFunction, "run", run, tag=TAG)
    patch.setattr(B, "create_fmul", create_fmul, tag=TAG)
    patch.setattr(B, "create_fdiv", create_fdiv, tag=TAG)
    patch.setattr(B, "create_select", create_select, tag=TAG)
    for method in ("create_splat", "create_broadcast"):
        patch.setattr(B, method, carries_quotient(method), tag=TAG)
    for op in ("fadd", "fsub"):
        patch.setattr(B, f"create_{op}", add_like(op), tag=TAG)
    patch.setattr(itp.ReduceOps, "apply_impl", reduce_impl, tag=TAG)
    patch.setattr(itp.ScanOps, "apply_impl", scan_impl, tag=TAG)
    for op, dtypes in MODELLED:
        differences.mark_modelled(patch, TAG, op, dtypes)
    return True


def installed() -> bool:
    """Whether the interpreter computes fp contraction, reductions and scans through this shim now."""
    from triton.runtime import interpreter as itp

    return patch_installed(itp.ReduceOps, "apply_impl", TAG)


def suspended() -> contextlib.AbstractContextManager[None]:
    """The interpreter's own order inside the block (every layer of this shim lifted), the shim's after: to
    measure what it changes."""
    return lift(TAG)
