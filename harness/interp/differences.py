"""What Triton's interpreter computes differently from the GPU, as data, and one warning per kernel and op for it.

Why data: several shims make ops GPU-exact (bf16 arithmetic, approximate math, tensor cores), and an op they
model must stop warning whichever shim was installed first. So :data:`KNOWN_DIFFERENT` holds a row per op that no
shim covers, and a shim that models an op marks its row modelled (:func:`mark_modelled`) through the session's
patch layer, which puts the row back when the session ends. The warning wrappers (:func:`install`) read the table
at call time.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterable
from typing import Any

from harness.interp.patch import Patch
from harness.names import format_name

__all__ = ["KNOWN_DIFFERENT", "TAG", "install", "mark_modelled", "reason", "warn"]

#: The tag of this module's records in the patch layer.
TAG = "differences"

#: (builder op, dtype name or "*") -> what the GPU does instead, for every interpreter op known to compute
#: something else than the GPU. A row whose value is ``None`` is modelled by a shim of this session; an exact
#: (op, dtype) row wins over the op's "*" row.
KNOWN_DIFFERENT: dict[tuple[str, str], str | None] = {
    ("create_fdiv", "fp32"): "the GPU's fp32 `/` is div.full.f32 (approximate: 27.6% of quotients 1-2 ulp off, "
                             "H200); the interpreter divides exactly (tl.math.div_rn is exact on both)",
    ("create_exp", "fp32"): "tl.exp lowers to ex2.approx.f32 (MUFU) on the GPU; the interpreter uses numpy's exp",
    ("create_exp2", "fp32"): "tl.exp2 lowers to ex2.approx.f32 (MUFU); the interpreter uses numpy's exp2",
    ("create_log", "fp32"): "tl.log is libdevice's __nv_logf on the GPU (a range reduction and an fma.rn.ftz "
                            "polynomial); the interpreter uses numpy's log",
    ("create_log2", "fp32"): "tl.log2 is libdevice's __nv_log2f on the GPU; the interpreter uses numpy's log2",
    ("create_sin", "fp32"): "tl.sin is libdevice's __nv_sinf on the GPU (fma.rn.ftz polynomials, an fp64 "
                            "reduction of large arguments; sm90 PTX, Triton 3.6/3.9); the interpreter uses numpy's "
                            "float32 sin",
    ("create_cos", "fp32"): "tl.cos is libdevice's __nv_cosf on the GPU (as tl.sin); the interpreter uses numpy's "
                            "float32 cos",
    ("create_erf", "fp32"): "tl.math.erf is libdevice's __nv_erff on the GPU (fma.rn.ftz and ex2.approx.ftz); the "
                            "interpreter rounds Python's double erf to fp32",
    ("create_sqrt", "fp32"): "tl.sqrt lowers to sqrt.approx.f32 (MUFU); the interpreter is correctly rounded "
                             "(tl.math.sqrt_rn is exact on both)",
    ("create_rsqrt", "fp32"): "tl.math.rsqrt lowers to rsqrt.approx.f32 (MUFU); the interpreter computes 1/sqrt",
    ("create_dot", "*"): "tl.dot accumulates in the tensor cores' order and precision (tf32 for fp32 inputs by "
                         "default); the interpreter uses numpy's matmul",
    ("create_dot_scaled", "*"): "tl.dot_scaled accumulates in the tensor cores' order; the interpreter uses "
                                "numpy's matmul",
    ("sum", "bf16"): "tl.sum of bf16 adds in bf16 on the GPU, in its layout's tree order; the interpreter adds "
                     "in bf16 (each add rounded, as there) but sequentially, so sums can round differently",
    ("scan", "bf16"): "tl.cumsum/cumprod of bf16 round each step in bf16 on the GPU in its scan order; the "
                      "interpreter steps sequentially",
    ("fma_contraction", "*"): "a product fed into + or - is contracted to one fma by the GPU compiler (fp "
                              "fusion, on by default through Triton 3.9): one rounding there, two here",
    ("atomic_order", "*"): "where several programs update one address, the GPU applies their atomics in an order "
                           "that changes from run to run (a float add rounds differently, an exchange or "
                           "compare-and-swap keeps another program's value); the interpreter runs programs in "
                           "order. Not reproducible on any lane: compare such outputs as a multiset, or with "
                           "harness.assert_deterministic on the GPU",
}

#: atomic operations whose result depends on the order of the updates (integer add, and/or/xor, min/max commute)
_ORDERED_ATOMICS = ("FADD", "XCHG")


def reason(op: str, dtype: str) -> str | None:
    """Why ``op`` on ``dtype`` differs from the GPU now, or ``None`` when it does not (or a shim models it)."""
    if (op, dtype) in KNOWN_DIFFERENT:
        return KNOWN_DIFFERENT[(op, dtype)]
    return KNOWN_DIFFERENT.get((op, "*"))


def mark_modelled(patch: Patch, tag: str, op: str, dtypes: Iterable[str] = ("*",)) -> None:
    """Record, in ``patch`` under the modelling shim's ``tag``, that ``op`` on ``dtypes`` computes what the GPU
    computes: no warning for it while the shim is installed (lifting the shim brings the warning back)."""
    for dtype in dtypes:
        patch.setitem(KNOWN_DIFFERENT, (op, dtype), None, tag=tag)


_kernels = threading.local()  # the stack of kernels running in this thread (one warning per kernel)


def _kernel() -> str:
    stack = getattr(_kernels, "stack", None)
    return stack[-1] if stack else "?"


class _Warnings:
    """One session's warnings: which (kernel, op, dtype) has been warned about."""

    def __init__(self) -> None:
        self.warned: set[tuple[str, str, str]] = set()

    def warn(self, op: str, dtype: str, why: str | None = None) -> None:
        why = why or reason(op, dtype)
        key = (_kernel(), op, dtype)
        if why is None or key in self.warned:
            return
        self.warned.add(key)
        warnings.warn(f"harness: interpreter op {op.removeprefix('create_')} on {dtype} in kernel {key[0]} is not "
                      f"what the GPU computes: {why}", RuntimeWarning, stacklevel=5)


_active: dict[int, _Warnings] = {}  # the installed sessions' warning states, innermost last


def warn(op: str, dtype: str, why: str | None = None) -> None:
    """Warn once per kernel, op and dtype that ``op`` is not what the GPU computes (``why``, else the table's
    row); nothing when no session installed the warnings or the op is modelled."""
    if _active:
        next(reversed(_active.values())).warn(op, dtype, why)


def dtype_name(t: Any) -> str:
    """The table's name of a Triton dtype (:func:`harness.dtypes.format_name`: ``fp32``, ``bf16``, ``e4nv`` …;
    other types by Triton's own name)."""
    scalar = getattr(t, "scalar", t)
    try:
        return format_name(scalar)
    except ValueError:  # ints, pointers: Triton's own name
        return str(scalar)


def install(patch: Patch) -> bool:
    """Arm the warnings through ``patch``: the interpreter's builder methods of the table's ops, its ``+``/``-``
    of a product (fma contraction) and its launches (which kernel runs) are wrapped. ``False`` when this Triton's
    interpreter is not importable."""
    try:
        from triton.runtime import interpreter as itp
    except ImportError:  # pragma: no cover - every interpreter lane has triton
        return False
    state = _Warnings()
    B = itp.InterpreterBuilder

    def warned(name: str) -> Any:
        orig = getattr(B, name)

        def fn(self: Any, *args: Any, **kwargs: Any) -> Any:
            warn(name, dtype_name(args[0].dtype))
            return orig(self, *args, **kwargs)

        fn.__name__ = name
        return fn

    orig_fmul = B.create_fmul

    def create_fmul(self: Any, lhs: Any, rhs: Any) -> Any:
        out = orig_fmul(self, lhs, rhs)
        out.attr["harness_product"] = True
        return out

    def contracted(name: str) -> Any:
        orig = getattr(B, name)

        def fn(self: Any, lhs: Any, rhs: Any) -> Any:
            if lhs.attr.get("harness_product") or rhs.attr.get("harness_product"):
                warn("fma_contraction", dtype_name(lhs.dtype))
            return orig(self, lhs, rhs)

        fn.__name__ = name
        return fn

    orig_rmw, orig_cas = B.create_atomic_rmw, B.create_atomic_cas

    def create_atomic_rmw(self: Any, rmwOp: Any, ptr: Any, val: Any, *args: Any) -> Any:  # noqa: N803
        if str(getattr(rmwOp, "name", rmwOp)).rsplit(".", 1)[-1] in _ORDERED_ATOMICS:
            warn("atomic_order", dtype_name(val.dtype))
        return orig_rmw(self, rmwOp, ptr, val, *args)

    def create_atomic_cas(self: Any, ptr: Any, cmp: Any, val: Any, *args: Any) -> Any:
        warn("atomic_order", dtype_name(val.dtype))
        return orig_cas(self, ptr, cmp, val, *args)

    grid_orig = itp.GridExecutor.__call__

    def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
        stack = getattr(_kernels, "stack", None)
        if stack is None:
            stack = _kernels.stack = []
        stack.append(getattr(self.fn, "__qualname__", getattr(self.fn, "__name__", "?")))
        try:
            return grid_orig(self, *args, **kwargs)
        finally:
            stack.pop()

    for name in sorted({op for op, _ in KNOWN_DIFFERENT if op.startswith("create_")} - {"create_fadd", "create_fsub"}):
        if callable(getattr(B, name, None)):
            patch.setattr(B, name, warned(name), tag=TAG)
    patch.setattr(B, "create_fmul", create_fmul, tag=TAG)
    patch.setattr(B, "create_atomic_rmw", create_atomic_rmw, tag=TAG)
    patch.setattr(B, "create_atomic_cas", create_atomic_cas, tag=TAG)
    for name in ("create_fadd", "create_fsub"):
        patch.setattr(B, name, contracted(name), tag=TAG)
    patch.setattr(itp.GridExecutor, "__call__", launch, tag=TAG)
    patch.setitem(_active, id(state), state, tag=TAG)  # undone with the session: its state stops warning
    return True
