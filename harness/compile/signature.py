"""What a compile is asked for: a kernel's signature (Triton type strings) and constexpr values, checked
against the kernel before anything reaches the compiler.

Why up front: a wrong type string or a torch dtype passed as a constexpr otherwise fails deep in Triton's
code generator with a message that names neither the argument nor the fix, and ``**fp16`` passes Triton's
parser and then aborts the process in LLVM. Every message here names the kernel, the argument and what
was expected.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.interp.jit import as_jit, interpreted_class, jit_class

__all__ = ["TYPE_STRINGS", "prepare"]


#: The element type names Triton's signature strings use. A pointer is ``*`` + a name (``*fp16``; ``*k`` +
#: name for a const pointer); a scalar argument is a name (``i32``, ``fp32``). FP8 is spelled Triton's way:
#: ``fp8e4nv`` (= float8_e4m3fn), ``fp8e5`` (= float8_e5m2), ``fp8e4b15`` (Triton's bias-15 e4m3),
#: ``fp8e4b8`` / ``fp8e5b16`` (ROCm's fnuz pair).
TYPE_STRINGS: tuple[str, ...] = (
    "i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16", "u32", "u64",
    "fp16", "bf16", "fp32", "fp64", "fp8e4nv", "fp8e5", "fp8e4b15", "fp8e4b8", "fp8e5b16",
)


def _type_hint(name: str) -> str:
    """``fp8_e4m3`` → `` (did you mean '*fp8e4nv'?)``: common spellings of FP8 formats and torch dtypes."""
    bare = name.lstrip("*").removeprefix("k")
    guess = None
    try:
        from harness.fp8 import get_format  # here: harness.fp8 imports torch, and loading the plugin must not

        fmt = get_format(bare.removeprefix("fp8").removeprefix("float8").lstrip("_"))
        guess = fmt.triton_name.replace("float8", "fp8")
    except (ValueError, TypeError, ImportError):
        aliases = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32",
                   "float64": "fp64", "int32": "i32", "int64": "i64", "int8": "i8", "uint8": "u8", "bool": "i1",
                   "int16": "i16"}
        guess = aliases.get(bare.removeprefix("torch.").removeprefix("tl."))
    if guess is None:
        return ""
    return f" (did you mean {('*' if name.startswith('*') else '') + guess!r}?)"


_TYPE_RE = re.compile(r"(\*k?)?([a-z0-9]+)")


def _check_type(kernel: str, arg: str, ty: str) -> None:
    """One pointer level at most (``**fp16`` passes Triton's parser and then aborts the process in LLVM)."""
    from triton.language import str_to_ty

    m = _TYPE_RE.fullmatch(ty)
    ok = ty.lstrip("*").startswith("tensordesc") or (m is not None and m.group(2) in TYPE_STRINGS)
    if ok:
        try:
            str_to_ty(ty, None)
        except (KeyError, IndexError, ValueError, AssertionError, AttributeError):
            ok = False
    if not ok:
        raise ValueError(
            f"{kernel}: signature[{arg!r}] = {ty!r} is not a Triton type string{_type_hint(ty)}; expected a "
            f"pointer '*' + element type or a scalar type, one of {', '.join(TYPE_STRINGS)} (e.g. '*fp16', "
            f"'*fp8e4nv', 'i32')"
        )


_CONSTEXPR_TYPES = (bool, int, float, str, type(None))


def _check_constexpr(kernel: str, arg: str, value: Any) -> None:
    """A constexpr value the code generator can take: a Python scalar, a string, ``None``, a ``tl.dtype``,
    a ``@triton.jit`` function or a tuple of these. A torch dtype or a tensor is the usual slip."""
    import triton.language as tl

    if isinstance(value, (list, tuple)):
        for v in value:
            _check_constexpr(kernel, arg, v)
        return
    if isinstance(value, _CONSTEXPR_TYPES) or isinstance(value, (tl.dtype, tl.constexpr)):
        return
    if isinstance(value, (jit_class(), interpreted_class())) or callable(getattr(value, "fn", None)):
        return
    hint = ""
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        hint = f" (a torch dtype: pass the Triton one, e.g. tl.{str(value).removeprefix('torch.')} or tl.float8e4nv)"
    raise ValueError(
        f"{kernel}: constexprs[{arg!r}] = {value!r} ({type(value).__name__}) is not a constexpr value{hint}; "
        f"expected bool, int, float, str, None, a tl.dtype, a @triton.jit function or a tuple of these"
    )


#: How the Python API names its two inputs in messages; ``python -m harness compile`` passes its flags instead.
API_NAMES: tuple[str, str] = ("signature=", "constexprs=")


def _normalise(
    jit: Any, signature: Mapping[str, str], constexprs: Mapping[str, Any] | None,
    names: tuple[str, str] = API_NAMES,
) -> tuple[dict[str, str], dict[str, Any]]:
    sig_name, const_name = names
    if not isinstance(signature, Mapping):
        raise TypeError(
            f"signature must be a dict of argument name -> type string, got {type(signature).__name__}"
        )
    constexprs = dict(constexprs or {})
    arg_names = list(jit.arg_names)
    is_cexpr = {p.name: bool(p.is_constexpr) for p in jit.params}
    kernel = jit.__name__
    unknown = [k for k in list(signature) + list(constexprs) if k not in arg_names]
    if unknown:
        raise ValueError(f"{kernel}: unknown argument(s) {sorted(set(unknown))}; the kernel takes {arg_names}")
    for k, v in signature.items():
        if not isinstance(v, str) or not v:
            raise ValueError(
                f"{kernel}: signature[{k!r}] must be a type string like '*fp16' or 'i32', got {v!r}"
            )
        if v == "constexpr" and k not in constexprs:
            raise ValueError(f"{kernel}: {sig_name} gives {k!r} as 'constexpr' but {const_name} has no value for it")
        if v != "constexpr":
            _check_type(kernel, k, v)
    for k, v in constexprs.items():
        _check_constexpr(kernel, k, v)
    sig: dict[str, str] = {}
    missing = []
    for n in arg_names:
        if n in constexprs:
            sig[n] = "constexpr"
        elif n in signature:
            if is_cexpr.get(n):
                raise ValueError(
                    f"{kernel}: {n!r} is tl.constexpr; give its value in {const_name}, not a type in {sig_name}"
                )
            sig[n] = signature[n]
        else:
            missing.append(n)
    if missing:
        raise ValueError(f"{kernel}: no type ({sig_name}) or value ({const_name}) for argument(s) {missing}")
    return sig, constexprs


def prepare(
    fn: Any, signature: Mapping[str, str], constexprs: Mapping[str, Any] | None,
    names: tuple[str, str] = API_NAMES,
) -> tuple[Any, dict[str, str], dict[str, Any]]:
    """``(jit, signature, constexprs)`` ready for ``triton.compile``: ``fn`` as a ``JITFunction`` (an
    interpreted kernel rebuilt), every argument typed in kernel order (``"constexpr"`` for the constexprs).
    ``ValueError``/``TypeError`` naming the argument for anything the compiler would choke on."""
    jit = as_jit(fn)
    sig, consts = _normalise(jit, signature, constexprs, names)
    return jit, sig, consts
