"""Interpreter shim: ``tl.dot_scaled`` as the run's arch computes it (:func:`harness.tensor_cores.dot_scaled`).

Why: Triton's interpreter (3.8/3.9, ``InterpreterBuilder.create_dot_scaled``) scales in fp32 and multiplies with
numpy's matmul, so most outputs differ from what sm90's bf16 emulation computes, and it reads NVFP4's e4m3 scale
bytes as e8m0 codes (a wrong product, silently). Triton 3.6's interpreter has no ``create_dot_scaled`` at all,
though its ``tl.dot_scaled`` front end calls the builder's method with the same arguments as 3.9's: so the shim
provides the method there (and gives 3.6's front end the constexpr formats it reads, which the interpreter passes
as plain strings), and a ``dot_scaled`` kernel runs on the 3.6 interpreter lane too.

:func:`install` routes the method through the model, decoding each scale by its real type (uint8: e8m0, MX;
float8e4nv: e4m3, NVFP4). Where the model says the target's compiler refuses the call
(:class:`harness.tensor_cores.DotScaledRefused`: NVFP4 or bf16 x fp16 on sm90 with Triton 3.6) the kernel fails
with that reason, as its compile would on the GPU. Where the model does not cover the call (an arch without a
model, an accumulator other than fp32) the interpreter's own method runs (on 3.6: a clear refusal), with one
warning per kernel from :mod:`harness.interp.arith`.

The instruction after the upcast is the one :func:`harness.interp.dots.instruction` names for the tile's M, the
launch's ``num_warps`` and the arch (sm90: ``wgmma`` for M a multiple of 64 on a multiple of 4 warps, else
``mma.sync``; mma.sync for every tile before sm90), as
Triton chooses it for ``tl.dot``: 3.6 and 3.9 compile a 64x64 ``dot_scaled`` tile on 2 warps to ``mma.sync``
(sm90 PTX, ``scripts/compile_dot_scaled_lowering.py``).
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import numpy as np
import torch

from harness.interp import differences
from harness.interp.dots import handle_dtype, handle_tensor, instruction, launch_num_warps
from harness.interp.patch import Patch
from harness.interp.patch import installed as patch_installed

__all__ = ["DECODES_SCALE_TYPES", "ENV_IMITATED", "TAG", "install", "installed"]

#: The tag of this shim's records in the patch layer (:mod:`harness.interp.patch`).
TAG = "scaled_dots"
#: The environment variable that names, while the shim is installed, the arch whose ``tl.dot_scaled`` the
#: interpreter computes (``interp`` for the default sm90 models, ``sm100`` under ``--harness-arch=sm100``): what a
#: launcher that picks its tiles by the GPU's capability reads on the interpreter (``kernels.mx.gemm``).
ENV_IMITATED = "HARNESS_INTERP_ARCH"
#: set on the installed method: its scales are decoded per their type (NVFP4's e4m3 too), which kernels may ask
#: with ``getattr(InterpreterBuilder.create_dot_scaled, DECODES_SCALE_TYPES, False)``
DECODES_SCALE_TYPES = "decodes_scale_types"
_PARAMS = ("self", "lhs", "lhs_scale_handle", "lhs_format_enum", "rhs", "rhs_scale_handle", "rhs_format_enum",
           "fast_math", "lhs_k_pack", "rhs_k_pack", "acc_handle")


def _problem(itp: Any) -> str | None:
    cls = getattr(itp, "InterpreterBuilder", None)
    if cls is None:
        return "no triton.runtime.interpreter.InterpreterBuilder"
    fn = getattr(cls, "create_dot_scaled", None)
    if fn is None:
        return None  # Triton 3.6: provided by the shim
    try:
        params = tuple(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return "create_dot_scaled has no inspectable signature"
    if params != _PARAMS and params != ("self", "args", "kwargs"):  # the latter: harness.interp.arith's wrapper
        return f"create_dot_scaled takes {params}, expected {_PARAMS}"
    return None


def _operand(tl: Any, h: Any) -> torch.Tensor:
    t = handle_tensor(tl, h)
    if t is not None:
        return t
    return torch.from_numpy(np.ascontiguousarray(h.data).view(np.uint8).copy())  # e2m1 bytes (uint8)


def _scale(tl: Any, h: Any) -> torch.Tensor | None:
    if h is None:
        return None
    t = torch.from_numpy(np.ascontiguousarray(h.data).view(np.uint8).copy())
    return t.view(torch.float8_e4m3fn) if handle_dtype(h) == tl.float8e4nv else t


def install(patch: Patch, arch: Any) -> bool:
    """Route the interpreter's ``tl.dot_scaled`` through the model of ``arch`` (an :class:`harness.arch.Arch` or
    name), via ``patch``; ``False`` after one warning when the interpreter is not understood (nothing patched)."""
    import triton.language as tl
    from triton.runtime import interpreter as itp

    from harness.tensor_cores import DotScaledRefused, dot_scaled

    problem = _problem(itp)
    if problem is not None:
        warnings.warn(f"harness.interp.scaled_dots: this Triton's interpreter is not understood ({problem}); "
                      "tl.dot_scaled keeps the interpreter's own", RuntimeWarning, stacklevel=2)
        return False
    name = getattr(arch, "name", arch)
    cls = itp.InterpreterBuilder
    had = "create_dot_scaled" in cls.__dict__
    orig = cls.__dict__.get("create_dot_scaled")

    def fallback(*args: Any, why: str) -> Any:  # the method replaced (Triton 3.6 has none)
        differences.warn("create_dot_scaled", "*", why)
        if orig is None:
            raise NotImplementedError(f"tl.dot_scaled on the Triton interpreter: not modelled for {name} and this "
                                      "Triton's interpreter has none of its own")
        return orig(*args)

    def create_dot_scaled(self: Any, lhs: Any, lhs_scale_handle: Any, lhs_format_enum: Any, rhs: Any,
                          rhs_scale_handle: Any, rhs_format_enum: Any, fast_math: Any, lhs_k_pack: Any,
                          rhs_k_pack: Any, acc_handle: Any) -> Any:
        args = (self, lhs, lhs_scale_handle, lhs_format_enum, rhs, rhs_scale_handle, rhs_format_enum, fast_math,
                lhs_k_pack, rhs_k_pack, acc_handle)
        if handle_dtype(acc_handle) != tl.float32:
            return fallback(*args, why=f"the models accumulate in fp32, not {handle_dtype(acc_handle)}; the "
                                       "interpreter's own computes it")
        acc = torch.from_numpy(np.ascontiguousarray(acc_handle.data, dtype=np.float32).copy())
        a, b = _operand(tl, lhs), _operand(tl, rhs)
        m = acc.shape[-2]
        try:
            out = dot_scaled(a, _scale(tl, lhs_scale_handle), lhs_format_enum.name.lower(), b,
                             _scale(tl, rhs_scale_handle), rhs_format_enum.name.lower(), acc, arch=name,
                             fast_math=bool(fast_math), a_k_pack=bool(lhs_k_pack), b_k_pack=bool(rhs_k_pack),
                             instr=instruction(m, launch_num_warps(), arch=name))
        except DotScaledRefused as e:
            raise DotScaledRefused(f"tl.dot_scaled on {name}: {e}") from None
        except NotImplementedError as e:
            return fallback(*args, why=f"no model of {name}'s tensor cores for this tl.dot_scaled tile ({e}); the "
                                       "interpreter's own computes it")
        return itp.TensorHandle(out.numpy().reshape(acc_handle.data.shape), tl.float32)

    create_dot_scaled.__dict__[DECODES_SCALE_TYPES] = True
    patch.setattr(cls, "create_dot_scaled", create_dot_scaled, tag=TAG)
    # a launcher picks its tiles by the arch its kernels run on, and on sm90 a tile's height picks the MMA and so
    # the bits (kernels/mx/gemm.py): on the interpreter that arch is the modelled one, named for launchers here
    patch.setenv(ENV_IMITATED, str(name), tag=TAG)
    differences.mark_modelled(patch, TAG, "create_dot_scaled")
    if not had:
        _fix_front_end(patch, tl)
    return True


def _fix_front_end(patch: Patch, tl: Any) -> None:
    """Triton 3.6's ``TritonSemantic.dot_scaled`` reads ``lhs_format.value``: compiled, the format is a constexpr;
    interpreted, a plain str, which fails before the builder is reached. Wrap the method to give it the constexpr
    it expects (a compile passes constexprs already, so it is unchanged)."""
    from triton.language import semantic

    cls = getattr(semantic, "TritonSemantic", None)
    orig = getattr(cls, "dot_scaled", None)
    if orig is None:
        return

    def dot_scaled(self: Any, lhs: Any, lhs_scale: Any, lhs_format: Any, rhs: Any, rhs_scale: Any, rhs_format: Any,
                   *args: Any, **kwargs: Any) -> Any:
        lhs_format = tl.constexpr(lhs_format) if isinstance(lhs_format, str) else lhs_format
        rhs_format = tl.constexpr(rhs_format) if isinstance(rhs_format, str) else rhs_format
        return orig(self, lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, *args, **kwargs)

    patch.setattr(cls, "dot_scaled", dot_scaled, tag=TAG)


def installed() -> bool:
    """Whether the interpreter's ``tl.dot_scaled`` is routed through the model now."""
    from triton.runtime import interpreter as itp

    return patch_installed(itp.InterpreterBuilder, "create_dot_scaled", TAG)
