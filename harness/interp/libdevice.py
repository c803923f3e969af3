"""``libdevice`` calls on the interpreter, as the compiled kernel makes them: data (which symbol is which
interpreter operation, and why) plus a small dispatcher.

Why: Triton's interpreter runs no extern function. A kernel calling ``triton.language.extra.libdevice.rsqrt``
(Liger-Kernel's norms, and many kernels of vLLM and SGLang) gets the backend-neutral stub, whose body is
``...``: the call returns ``None`` and the kernel fails later with an unrelated error ("cannot convert None
... to tensor"). The compiler instead maps that module to ``triton.language.extra.cuda.libdevice``
(``CUDABackend.get_module_map``, Triton 3.6 and 3.9), whose functions call ``extern_elementwise``, which the
interpreter refuses ("extern_elementwise not supported in interpreter mode").

Here, for each interpreted launch (and device call), the stub module and the stub functions a kernel's globals
hold are mapped to the CUDA module as the compiler maps them, that module's builtins get the interpreter's
semantic as ``triton.language``'s do, and ``extern_elementwise`` runs the symbols of :data:`SYMBOLS`:

- each is a libdevice function whose sm90 PTX is the very instruction sequence of a ``tl.math`` op (compiled
  with Triton 3.9 and 3.6 for ``cuda:90``, fp32: ``__nv_rsqrtf`` and ``tl.math.rsqrt`` are both
  ``rsqrt.approx.ftz.f32``; ``__nv_sqrtf``/``tl.sqrt`` ``sqrt.approx.ftz.f32``; ``__nv_exp2f``/``tl.exp2``
  ``ex2.approx.ftz.f32``; ``__nv_floorf``/``tl.floor`` ``cvt.rmi.ftz.f32.f32``; ``__nv_ceilf``/``tl.ceil``
  ``cvt.rpi.ftz.f32.f32``; ``tl.log``, ``tl.log2``, ``tl.sin``, ``tl.cos``, ``tl.erf`` *are* the libdevice
  functions): it runs as that op, through whatever model the session has for it
  (:mod:`harness.interp.approx_math`), so it is exactly as exact as the op;
- or a single IEEE-exact instruction (``__nv_truncf``: ``cvt.rzi.f32.f32``; ``__nv_rintf``,
  ``__nv_nearbyintf``: ``cvt.rni.f32.f32``), computed by NumPy, which rounds the same way.

Any other symbol raises :class:`NotImplementedError` naming it and what is modelled: the GPU computes it in
software (``__nv_expf``, ``__nv_powf``, ``__nv_tanhf``: many instructions) or with ``.ftz`` variants
(``__nv_fsqrt_rn``, ``__nv_fdiv_rn``) that no model here reproduces. fp64 and other types are refused
the same way: the table was derived for fp32 alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.interp.patch import Patch, installed, parameters

__all__ = ["SYMBOLS", "TAG", "install"]

TAG = "libdevice"

#: libdevice symbol -> ("op", interpreter builder method) to run as that ``tl.math`` op, or ("numpy", ufunc
#: name) for an IEEE-exact single instruction. fp32 only; see the module docstring for the PTX each rests on.
SYMBOLS: dict[str, tuple[str, str]] = {
    "__nv_rsqrtf": ("op", "create_rsqrt"),
    "__nv_sqrtf": ("op", "create_sqrt"),
    "__nv_exp2f": ("op", "create_exp2"),
    "__nv_logf": ("op", "create_log"),
    "__nv_log2f": ("op", "create_log2"),
    "__nv_sinf": ("op", "create_sin"),
    "__nv_cosf": ("op", "create_cos"),
    "__nv_floorf": ("op", "create_floor"),
    "__nv_ceilf": ("op", "create_ceil"),
    "__nv_erff": ("op", "create_erf"),
    "__nv_truncf": ("numpy", "trunc"),
    "__nv_rintf": ("numpy", "rint"),
    "__nv_nearbyintf": ("numpy", "rint"),
}

_STUB = "triton.language.extra.libdevice"


def _extern_elementwise(self: Any, libName: str, libPath: str, symbol: str, argList: Any, retType: Any,  # noqa: N803
                        isPure: bool) -> Any:  # noqa: N803 - the builder's own parameter names
    from triton.runtime import interpreter as itp

    rule = SYMBOLS.get(symbol)
    args = list(argList)
    if rule is None or len(args) != 1 or args[0].data.dtype != np.float32:
        why = ("an fp32 argument" if rule is not None or f"{symbol}f" in SYMBOLS else
               "a libdevice function the GPU computes as one modelled op or one IEEE-exact instruction")
        raise NotImplementedError(
            f"libdevice {symbol}: the CPU lane has no model of what the GPU computes here (Triton's interpreter "
            f"runs no extern function); expected {why}. Modelled, fp32: "
            f"{', '.join(sorted(s.removeprefix('__nv_') for s in SYMBOLS))}")
    kind, name = rule
    if kind == "op":
        return getattr(self, name)(args[0])
    out = getattr(np, name)(args[0].data)
    return itp.TensorHandle(out.astype(np.float32), args[0].dtype.scalar)


class _Globals:
    """A function's globals as attributes: what ``_LangPatchScope.set_attr`` restores after the launch."""

    def __init__(self, g: dict[str, Any]) -> None:
        object.__setattr__(self, "_g", g)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._g[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self._g[name] = value

    def __delattr__(self, name: str) -> None:
        del self._g[name]


def install(patch: Patch) -> bool:
    """Map ``libdevice`` calls as the compiler does and run :data:`SYMBOLS` on the interpreter, through
    ``patch``. ``False`` when nothing was patched: the mapping is in place (an outer session's), or this
    Triton's interpreter or libdevice modules look different (left alone)."""
    try:
        from triton.language.extra import libdevice as stub
        from triton.language.extra.cuda import libdevice as cuda
        from triton.runtime import interpreter as itp
    except ImportError:  # pragma: no cover - every supported triton has them
        return False
    orig = getattr(itp, "_patch_lang", None)
    patch_builtin = getattr(itp, "_patch_builtin", None)
    builder_cls = getattr(itp, "InterpreterBuilder", None)
    if orig is None or patch_builtin is None or builder_cls is None or installed(itp, "_patch_lang", TAG):
        return False
    if not callable(getattr(builder_cls, "create_extern_elementwise", None)):
        return False
    if parameters(patch_builtin) != ["pkg", "builder", "scope"]:
        return False
    cuda_name = cuda.__name__

    def _patch_lang(fn: Any) -> Any:
        scope = orig(fn)
        g = fn.__globals__
        uses = [(k, v) for k, v in g.items()
                if v is stub or v is cuda or getattr(v, "__module__", None) in (_STUB, cuda_name)]
        if uses:
            patch_builtin(cuda, itp.interpreter_builder, scope)
            view = _Globals(g)
            for k, v in uses:
                if v is stub:
                    scope.set_attr(view, k, cuda)
                elif v is not cuda:
                    wrapped = getattr(cuda, getattr(v, "__name__", ""), None)  # the interpreter's wrapper of it
                    if wrapped is not None and wrapped is not v:
                        scope.set_attr(view, k, wrapped)
        return scope

    patch.setattr(itp, "_patch_lang", _patch_lang, tag=TAG)
    patch.setattr(builder_cls, "create_extern_elementwise", _extern_elementwise, tag=TAG)
    return True
