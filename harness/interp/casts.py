"""Make the Triton interpreter's float <-> FP8 conversions compute what a GPU computes.

Why: the interpreter converts with its own bit-twiddling (``triton.runtime.interpreter._convert_float``),
which differs from every GPU (up to 8 ULP on 15% of fp16 -> e4nv inputs, no saturation, NaN codes for
large values) and accepts casts the compiler refuses (bf16 -> e4b15, e4nv before sm89). A CPU run can then
neither check a GPU golden exactly nor catch the seed bug. :func:`install` wraps that one function, the
single point every interpreter FP8 conversion goes through (``.to()``, ``tl.cast``, the FP8 operands of
``tl.dot``, the mxfp decode) in Triton 3.6 through 3.9, so that

- float -> FP8 gives ``harness.fp8.encode(x, fmt, arch=target)``: the target's own lowering (sm90 by
  default), bit for bit as tabled on an H200 (golden/test_fp8_targets);
- FP8 -> float gives ``harness.fp8.decode`` (NaN and inf codes decode to NaN and inf);
- what the compiler refuses for the target raises :class:`CastRefusedError`, a ``CompilationError``
  (the interpreter reports it as ``InterpreterError`` with this as its cause).

Everything else goes to the original function. A Triton whose interpreter lacks the function (or has
another signature) gets one warning and the interpreter's own casts: never a silent half-patch.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

import numpy as np
import torch

from harness.arch import Arch, parse_arch, supports_format
from harness.fp8 import FORMATS, IMITATES_ATTR, decode, encode, rz_f16_bits
from harness.interp.patch import Patch, installed, lift, parameters
from harness.names import names

__all__ = ["CastRefusedError", "install", "active_target", "target_for", "suspended", "DEFAULT_TARGET", "TAG"]

#: The tag of this shim's records in the patch layer (:mod:`harness.interp.patch`).
TAG = "casts"

#: The arch whose casts the interpreter reproduces when none is given (the H200 the goldens come from).
DEFAULT_TARGET = "sm90"

_EXPECTED_PARAMS = ["input", "input_dtype", "output_dtype", "rounding_mode"]


def _compilation_error_base() -> type[Exception]:
    try:
        from triton.compiler.errors import CompilationError
    except ImportError:  # pragma: no cover - triton is a dependency of every lane that interprets
        return RuntimeError
    return CompilationError


class CastRefusedError(_compilation_error_base()):  # type: ignore[misc]
    """A cast the compiler refuses for the target arch, refused by the interpreter as well."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)
        self.src, self.node, self.error_message = None, None, message
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> Any:
        return (type(self), (self.message,))


def active_target() -> Arch | None:
    """The arch whose casts the interpreter currently reproduces, or ``None`` when it uses its own."""
    try:
        from triton.runtime import interpreter as module
    except ImportError:  # pragma: no cover
        return None
    if not installed(module, "_convert_float", TAG):
        return None
    return getattr(module._convert_float, IMITATES_ATTR, None)


def target_for(arch: Arch | str | None) -> Arch:
    """The arch to imitate for a session assuming ``arch``: itself when it is a CUDA arch, else sm90."""
    a = parse_arch(arch) if arch is not None else None
    return a if a is not None and a.kind == "cuda" else parse_arch(DEFAULT_TARGET)


def install(patch: Patch, target: str | Arch | None = None) -> bool:
    """Wrap the interpreter's converter, through ``patch``, so its FP8 casts are ``target``'s (default sm90).
    ``False`` (after one warning) when this Triton's interpreter is not understood: nothing is patched then.

    ``target`` must be a CUDA arch: ``interp``/``cpu`` (no GPU to imitate) and ROCm (not modelled) raise.
    """
    t = parse_arch(DEFAULT_TARGET if target is None else target)
    if t.kind != "cuda":
        raise ValueError(f"target {t.name!r}: the interpreter can imitate a CUDA arch (e.g. 'sm90', 'sm80'); "
                         f"{t.kind} casts are not modelled")
    try:
        import triton.language as tl
        from triton.runtime import interpreter as module
    except ImportError as e:
        warnings.warn(f"harness: Triton's interpreter is not importable ({e}); its own FP8 casts stay in use",
                      RuntimeWarning, stacklevel=2)
        return False
    original = getattr(module, "_convert_float", None)
    problem = _layout_problem(original, tl)
    if problem:
        warnings.warn(f"harness: cannot make the interpreter's FP8 casts GPU-exact on Triton "
                      f"{getattr(module, '__name__', '?')} ({problem}); its own casts stay in use, and FP8 "
                      f"codes differ from a GPU's (docs/MEASUREMENTS.md)", RuntimeWarning, stacklevel=2)
        return False
    patch.setattr(module, "_convert_float", _make_wrapper(original, t, tl), tag=TAG)
    return True


def suspended() -> contextlib.AbstractContextManager[None]:
    """The interpreter's own casts inside the block (every layer of this shim lifted: to measure or model
    them), the installed ones after."""
    return lift(TAG)


def _layout_problem(original: Any, tl: Any) -> str | None:
    if not callable(original):
        return "no triton.runtime.interpreter._convert_float"
    params = parameters(original)
    if params is None:
        return "_convert_float has no inspectable signature"
    if params != _EXPECTED_PARAMS:
        return f"_convert_float takes {params}, expected {_EXPECTED_PARAMS}"
    missing = [n for n in ("float16", "bfloat16", "float32", *(f.triton_name for f in FORMATS.values()))
               if not hasattr(tl, n)]
    if missing:
        return f"triton.language lacks {missing}"
    return None


_SRC = {"float16": (torch.float16, np.uint16, torch.int16), "bfloat16": (torch.bfloat16, np.uint16, torch.int16),
        "float32": (torch.float32, np.uint32, torch.int32)}
_OUT_UINT = {"float16": np.uint16, "bfloat16": np.uint16, "float32": np.uint32}


def _make_wrapper(original: Any, target: Arch, tl: Any) -> Any:
    fp8_by_tl = {getattr(tl, f.triton_name): f for f in FORMATS.values() if f.name in ("e4nv", "e5m2", "e4b15")}
    floats = {getattr(tl, n): n for n in _SRC}

    def _convert_float(input, input_dtype, output_dtype, rounding_mode):  # noqa: A002 - Triton's own names
        if input_dtype in floats and output_dtype in fp8_by_tl:
            return _to_fp8(input, floats[input_dtype], fp8_by_tl[output_dtype], rounding_mode, target)
        if input_dtype in fp8_by_tl and output_dtype in floats:
            return _from_fp8(input, fp8_by_tl[input_dtype], floats[output_dtype])
        return original(input, input_dtype, output_dtype, rounding_mode)

    _convert_float.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(_convert_float, IMITATES_ATTR, target)  # how harness.fp8.encode(arch="interp") knows
    _convert_float.__doc__ = f"harness: FP8 casts as {target.name} computes them (harness.interp.casts)"
    return _convert_float


def _as_torch(input: np.ndarray, src: str) -> torch.Tensor:
    tdt, udt, idt = _SRC[src]
    bits = np.frombuffer(np.ascontiguousarray(input).tobytes(), dtype=udt).astype(
        np.int16 if udt == np.uint16 else np.int32)
    return torch.from_numpy(bits.copy()).view(idt).view(tdt)


def _to_fp8(input: np.ndarray, src: str, fmt: Any, rounding_mode: Any, target: Arch) -> np.ndarray:
    ok, reason = supports_format(target, fmt)
    if not ok:
        raise CastRefusedError(f"cast {src} -> {fmt.triton_name} refused for {target.name} "
                               f"(as the compiler refuses it): {reason}")
    if fmt.name == "e4b15" and src == "bfloat16":
        raise CastRefusedError(f"cast bfloat16 -> float8e4b15 refused for {target.name}: Triton's compiler has "
                               f"no bf16 -> e4b15 conversion (it fails with CompilationError); convert to "
                               f"float32 first: x.to(tl.float32).to(tl.float8e4b15)")
    x = _as_torch(input, src).reshape(-1)
    rtz = rounding_mode is not None and "RTZ" in str(rounding_mode).upper()
    if rtz:
        codes = _encode_rtz(x, src, fmt, target)
    else:
        codes = encode(x, fmt, arch=target)
    return codes.numpy().astype(np.uint8).reshape(np.shape(input))


def _encode_rtz(x: torch.Tensor, src: str, fmt: Any, target: Arch) -> torch.Tensor:
    # Triton 3.6 lowers fp_downcast_rounding="rtz" to FP8 only from fp32 to e5m2 (cvt.rz.f16.f32, then the
    # low byte dropped) and to e4b15 (whose software routine rounds half away whatever the mode); every other
    # pair fails in the backend ("Unsupported rounding mode for conversion to fp8: rtz").
    if fmt.name == "e4b15":
        return encode(x, fmt, arch=target)
    if fmt.name == "e5m2" and src == "float32":
        return (((rz_f16_bits(x) & 0xFFFE) >> 8) & 0xFF).to(torch.uint8)
    raise CastRefusedError(f"cast {src} -> {fmt.triton_name} with fp_downcast_rounding='rtz' refused: Triton's "
                           f"NVIDIA backend has no such conversion (Unsupported rounding mode for conversion to "
                           f"fp8: rtz)")


def _from_fp8(input: np.ndarray, fmt: Any, dst: str) -> np.ndarray:
    codes = torch.from_numpy(np.ascontiguousarray(input).astype(np.uint8).reshape(-1).copy())
    vals = decode(codes, fmt)  # exact in fp32, and in fp16/bf16 too (every FP8 value fits both)
    out = vals.to(names(dst).torch_dtype)
    ibits = out.view(torch.int16 if dst != "float32" else torch.int32).numpy()
    return ibits.view(_OUT_UINT[dst]).reshape(np.shape(input))
