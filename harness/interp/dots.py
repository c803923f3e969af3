"""Interpreter shim: ``tl.dot`` as the tensor cores of the run's arch compute it (:mod:`harness.tensor_cores`).

Triton's interpreter (3.6 through 3.9: ``InterpreterBuilder.create_dot(self, a, b, d, input_precision,
max_num_imprecise_acc)``) computes ``np.matmul`` on the stored arrays: exact-ish for fp16/FP8, garbage for bf16
(it multiplies the raw uint16 patterns). :func:`install` replaces that method for fp32 accumulators with fp16,
bf16, fp32 or FP8 operands (every e4m3/e5m2 pair) by :func:`harness.tensor_cores.dot` for the run's arch; anything
else (int8, fp16 accumulators, an arch without a model) goes to the method it replaced, which warns through
:mod:`harness.interp.arith`.

Assumptions, stated where they matter: the interpreter passes ``max_num_imprecise_acc=0`` by default, so 0 is
taken as Triton's GPU default (sm90: never promote); an explicit 0 cannot be told apart. The instruction
(:func:`instruction`) is per arch: on sm90 ``wgmma`` for tiles with M a multiple of 64 launched with ``num_warps``
a multiple of 4, ``mma.sync`` otherwise (Triton 3.6's sm90 PTX of FP8 tiles 16/32x64 w4, 64x64 w2 and 16x16 w1:
mma.sync; 64x64 w4/w8, 128x64 w4, 128x32 w8, 64x16 w4: wgmma), and only FP8 operands compute differently under
the two; on sm100 the same tiles get ``tcgen05.mma`` (the published model of :mod:`harness.tensor_cores.tcgen05`), the
others mma.sync; sm80-sm89 and sm120 have mma.sync only. The interpreter drops ``num_warps``
before the kernel runs, so :func:`install` also wraps the launch (``GridExecutor.__call__``) to note the launch's
``num_warps`` (Triton's default 4 when not given) for the dots inside it. A dot the target's compiler refuses
(e4m3 below sm89) raises :class:`harness.tensor_cores.DotRefused` naming the arch, as the compile would fail.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from harness.interp import differences
from harness.interp.patch import Patch, lift
from harness.interp.patch import installed as patch_installed

__all__ = ["MODELLED_DTYPES", "TAG", "install", "installed", "instruction", "launch_num_warps", "suspended"]

#: The tag of this shim's records in the patch layer (:mod:`harness.interp.patch`).
TAG = "dots"
#: Operand types (:func:`harness.interp.differences.dtype_name`) whose dots the tensor-core models compute.
MODELLED_DTYPES = ("fp16", "bf16", "fp32", "e4nv", "e5m2")
_PARAMS = ("self", "a", "b", "d", "input_precision", "max_num_imprecise_acc")
#: ``num_warps`` of the launch being interpreted (Triton's default: 4)
_NUM_WARPS: contextvars.ContextVar[int] = contextvars.ContextVar("harness_dots_num_warps", default=4)


def instruction(m: int, num_warps: int, *, arch: Any) -> str:
    """Which instruction Triton gives a dot of an ``m``-row tile under ``num_warps`` on ``arch`` (an
    :class:`harness.arch.Arch` or name): ``"wgmma"`` (sm90), ``"tcgen05"`` (sm100-sm119) or ``"mma"`` (mma.sync).

    Read from the PTX of plain ``tl.dot`` tiles (fp16, bf16, tf32, every FP8 pair), Triton 3.6.0 and 3.9.0, the
    same in both (``scripts/compile_dot_scaled_lowering.py --plain``, 2026-12-04): sm80, sm86, sm89 and sm120 give
    every tile mma.sync (128x128 w4/w8, 256x64 w4, 128x64 w8, 64x64 w1/w2/w4/w8, 64x16 w4, 32x64 w4, 16x64 w4,
    16x16 w1); sm100 gives tcgen05.mma to exactly the tiles sm90 gives wgmma (M a multiple of 64 on a multiple of 4
    warps: 128x128 w4/w8, 256x64 w4, 128x64 w8, 64x64 w4/w8, 64x16 w4) and mma.sync to the rest."""
    from harness.arch import parse_arch

    cc = parse_arch(arch).cc or 0
    warpgroup = m % 64 == 0 and num_warps % 4 == 0
    if 90 <= cc < 100:
        return "wgmma" if warpgroup else "mma"
    if 100 <= cc < 120:
        return "tcgen05" if warpgroup else "mma"
    return "mma"


def launch_num_warps() -> int:
    """``num_warps`` of the launch the interpreter is running (Triton's default 4 outside a wrapped launch); the
    ``tl.dot_scaled`` shim picks its instruction with it too."""
    return _NUM_WARPS.get()


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """torch on one thread while a tile's dot is modelled. Why: the interpreter runs one program at a time and a
    tile's dot is small (thousands of products per step), where torch's intra-op threads cost more than they give;
    on a loaded 2-core box an FP8 tile dot (128 x 16 outputs, K = 128) took 63-103 ms on 2 threads, 2.4-3.6 ms on
    one (2026-12-04)."""
    n = torch.get_num_threads()
    if n == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def _problem(itp: Any) -> str | None:
    cls = getattr(itp, "InterpreterBuilder", None)
    fn = getattr(cls, "create_dot", None)
    if fn is None:
        return "no triton.runtime.interpreter.InterpreterBuilder.create_dot"
    try:
        params = tuple(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return "create_dot has no inspectable signature"
    if params != _PARAMS and params != ("self", "args", "kwargs"):  # the latter: another shim's forwarder
        return f"create_dot takes {params}, expected {_PARAMS}"
    return None


def handle_dtype(h: Any) -> Any:
    """The element type of an interpreter ``TensorHandle`` (a block's scalar type, or the scalar's own)."""
    return h.dtype.scalar if hasattr(h.dtype, "scalar") else h.dtype


def handle_tensor(tl: Any, h: Any) -> torch.Tensor | None:
    """An interpreter ``TensorHandle`` of fp16, bf16, fp32 or FP8 as the torch tensor of the same bits (a copy);
    ``None`` for other element types. Shared by the ``tl.dot`` and ``tl.dot_scaled`` shims."""
    dt = handle_dtype(h)
    data = np.ascontiguousarray(h.data)
    if dt == tl.float16:
        return torch.from_numpy(data.view(np.float16).copy())
    if dt == tl.float32:
        return torch.from_numpy(data.view(np.float32).copy())
    if dt == tl.bfloat16:
        return torch.from_numpy(data.view(np.int16).copy()).view(torch.bfloat16)
    if dt == tl.float8e4nv:
        return torch.from_numpy(data.view(np.uint8).copy()).view(torch.float8_e4m3fn)
    if dt == tl.float8e5:
        return torch.from_numpy(data.view(np.uint8).copy()).view(torch.float8_e5m2)
    return None


def install(patch: Patch, arch: Any) -> bool:
    """Route the interpreter's ``tl.dot`` through the model of ``arch`` (an :class:`harness.arch.Arch` or name),
    via ``patch``; ``False`` after one warning when the interpreter is not understood (nothing patched)."""
    import triton.language as tl
    from triton.runtime import interpreter as itp

    from harness import tensor_cores

    problem = _problem(itp)
    if problem is not None:
        warnings.warn(f"harness.interp.dots: this Triton's interpreter is not understood ({problem}); tl.dot keeps "
                      "the interpreter's numpy matmul", RuntimeWarning, stacklevel=2)
        return False
    name = getattr(arch, "name", arch)
    cls = itp.InterpreterBuilder
    orig = cls.create_dot

    def create_dot(self: Any, a: Any, b: Any, d: Any, input_precision: Any, max_num_imprecise_acc: Any) -> Any:
        ta, tb = handle_tensor(tl, a), handle_tensor(tl, b)
        acc_dt = handle_dtype(d)
        ip = str(input_precision).lower().rsplit(".", 1)[-1] if input_precision is not None else None
        if ta is None or tb is None or acc_dt != tl.float32:
            return orig(self, a, b, d, input_precision, max_num_imprecise_acc)
        mnia = max_num_imprecise_acc or None
        acc = torch.from_numpy(np.ascontiguousarray(d.data, dtype=np.float32))
        try:
            if ta.dim() == 2:
                ta, tb, acc = ta[None], tb[None], acc[None]
            instr = instruction(ta.shape[1], _NUM_WARPS.get(), arch=name)
            ipx = ip if ta.dtype == torch.float32 else None
            with _one_thread():
                outs = [tensor_cores.dot(x, y, c, arch=name, input_precision=ipx, max_num_imprecise_acc=mnia,
                                         instr=instr) for x, y, c in zip(ta, tb, acc, strict=True)]
        except tensor_cores.DotRefused as e:
            raise tensor_cores.DotRefused(f"tl.dot on {name}: {e}") from None
        except NotImplementedError as e:
            differences.warn("create_dot", differences.dtype_name(handle_dtype(a)),
                             f"no model of {name}'s tensor cores for this tl.dot tile ({e}); the interpreter's numpy "
                             "matmul computes it")
            return orig(self, a, b, d, input_precision, max_num_imprecise_acc)
        out = torch.stack(outs).reshape(d.data.shape).numpy()
        return itp.TensorHandle(out, acc_dt)

    grid_cls = itp.GridExecutor
    grid_orig = grid_cls.__call__

    def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
        token = _NUM_WARPS.set(int(kwargs.get("num_warps") or 4))
        try:
            return grid_orig(self, *args, **kwargs)
        finally:
            _NUM_WARPS.reset(token)

    patch.setattr(cls, "create_dot", create_dot, tag=TAG)
    patch.setattr(grid_cls, "__call__", launch, tag=TAG)
    differences.mark_modelled(patch, TAG, "create_dot", MODELLED_DTYPES)
    return True


def suspended() -> contextlib.AbstractContextManager[None]:
    """The interpreter's own ``tl.dot`` (numpy matmul) inside the block, the model's after: to measure or model
    what the interpreter does without the shim."""
    return lift(TAG)


def installed() -> bool:
    """Whether the interpreter's ``tl.dot`` is routed through the model now."""
    from triton.runtime import interpreter as itp

    return patch_installed(itp.InterpreterBuilder, "create_dot", TAG)
