"""Launch capture's record of a launch: what one interpreted kernel launch was (:class:`Launch`, built from the
real call), its widened dtype variants (:func:`variants`), the capture of the launches a block of code makes
(:func:`capture`), and the failures a user declares expected (:func:`expect_compile_failure`).

Why: a kernel test on the CPU lane runs the Triton interpreter, which accepts casts no GPU compiler lowers (the
seed bug: a bf16 load cast straight to ``tl.float8e4b15``). Writing compile-matrix tests by hand for every
kernel took 63 of them and undocumented signature strings. Instead, every distinct launch (kernel, argument
types from the actual tensors and scalars, constexpr values, ``num_warps``/``num_stages``) is compiled for the
matrix targets, and so are its *widened* variants: the floating-point tensor arguments in the other source
dtypes (fp16/bf16/fp32, each pointer alone and all together), because the bug is usually in the dtype the test
did not run. Compiling them, with the on-disk cache, is :mod:`harness.compile.disk_cache`; which outcomes are
findings is :mod:`harness.compile.findings`; their text is :mod:`harness.compile.message`.

Capture state (the open capture blocks, the launches that could not be typed, the declarations) belongs to the
running pytest session: it is the session's ``compile_launches`` section, a :class:`CaptureState`. A pytester
session nested in a captured test is current while it runs, so its launches reach none of the outer test's
blocks and its declarations end with it. Outside pytest (``python -m harness compile``, a script) one
process-wide state is used.

Public API: :class:`Launch`, :func:`launch_from_args`, :func:`variants`, :func:`constexpr_text`,
:class:`CaptureState`, :func:`state`, :func:`capture`, :func:`expect_compile_failure`.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.compile.targets import parse_targets
from harness.imports import after_import
from harness.interp.jit import as_jit
from harness.interp.patch import Patch, installed
from harness.names import NAMES
from harness.session import current

__all__ = [
    "FP8_FORMAT_OF_TYPE",
    "FP8_WIDEN",
    "SCALE_LABEL",
    "SCALE_TYPES",
    "SECTION",
    "WIDEN_DTYPES",
    "CaptureState",
    "Captured",
    "Declarations",
    "Launch",
    "capture",
    "constexpr_text",
    "expect_compile_failure",
    "skip_compile",
    "atomic_pointers",
    "calls_dot",
    "calls_dot_scaled",
    "launch_from_args",
    "scale_pointers",
    "state",
    "variants",
    "code_flags",
    "flag_text",
    "flag_variants",
    "pointer_variants",
]

#: The tag of capture's launch wrapper in the patch layer (:mod:`harness.interp.patch`).
CAPTURE_TAG = "capture"

#: The source dtypes a floating-point tensor argument is widened to.
WIDEN_DTYPES: tuple[str, ...] = ("fp16", "bf16", "fp32")
_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
#: Triton's FP8 type names (``fp8e4nv``) → the harness's format names (``e4nv``), which the arch model takes.
FP8_FORMAT_OF_TYPE: dict[str, str] = {NAMES[n].triton_type: n
                                      for n in ("e4nv", "e5m2", "e4b15", "e4m3fnuz", "e5m2fnuz")}


def _torch_types() -> dict[Any, str]:
    import torch  # on the first typed launch: loading the plugin imports no torch

    out = {row.torch_dtype: row.triton_type for row in NAMES.values() if row.torch_dtype and row.triton_type}
    for name, ty in (("int8", "i8"), ("int16", "i16"), ("int32", "i32"), ("int64", "i64"), ("uint8", "u8"),
                     ("bool", "i1"), ("uint16", "u16"), ("uint32", "u32"), ("uint64", "u64")):
        if hasattr(torch, name):
            out[getattr(torch, name)] = ty
    return out


def _tl_type(dtype: Any) -> str | None:
    """The signature type of a ``tl.dtype`` (``triton.reinterpret(x, tl.uint32)``'s ``TensorWrapper``, how
    Triton's own tests pass FP8 and unsigned tensors), spelled as Triton's launcher spells it: ``u32``,
    ``fp8e4nv``."""
    name = getattr(dtype, "name", None)
    if not isinstance(name, str):
        return None
    m = re.fullmatch(r"(u?)int(\d+)", name)
    if m:
        return f"{m.group(1) or 'i'}{m.group(2)}"
    return name


@dataclass(frozen=True)
class Launch:
    """One distinct launch: what :func:`harness.compile.matrix.compile_matrix` needs to compile it again."""

    kernel: str  # "module.qualname"
    file: str
    signature: tuple[tuple[str, str], ...]
    constexprs: tuple[tuple[str, Any], ...]
    options: tuple[tuple[str, int], ...] = ()
    fn: Any = field(default=None, compare=False, hash=False, repr=False)
    #: constexprs an autotune config set (tiles): never collapsed as sizes by :meth:`config_key`.
    pinned: tuple[str, ...] = field(default=(), compare=False, hash=False, repr=False)

    @property
    def sig(self) -> dict[str, str]:
        return dict(self.signature)

    def sig_text(self) -> str:
        """``x_ptr=*bf16, n=i32`` — the form ``python -m harness compile --sig`` takes."""
        return ", ".join(f"{k}={v}" for k, v in self.signature)

    def float_pointers(self) -> list[str]:
        return [k for k, v in self.signature if v.lstrip("*") in WIDEN_DTYPES and v.startswith("*")]

    def fp8_formats(self) -> set[str]:
        """FP8 formats this launch names through pointer types or ``tl.dtype`` constexprs."""
        out = {FP8_FORMAT_OF_TYPE[v.lstrip("*")] for _, v in self.signature if v.lstrip("*") in FP8_FORMAT_OF_TYPE}
        for _, v in self.constexprs:
            name = getattr(v, "name", None)
            if isinstance(name, str) and name in FP8_FORMAT_OF_TYPE:
                out.add(FP8_FORMAT_OF_TYPE[name])
        return out

    def config_key(self) -> tuple[Any, ...]:
        """What makes two launches the same configuration for capture: kernel, argument types, options and
        every constexpr except integers other than 0 and 1. Why: integer constexprs are overwhelmingly sizes
        (``BLOCK``, ``HEAD_DIM``, ``PAGE``) that a suite sweeps over and that never change how a dtype lowers,
        while 0/1 flags and every other value (``tl.dtype``, floats, bools, strings) select code paths. An
        enum constexpr with values above 1 is collapsed too: ``--harness-compile-all-configs`` keeps every one.
        """
        consts = tuple((k, "<int>" if _is_size(v) and k not in self.pinned else constexpr_text(v))
                       for k, v in self.constexprs)
        return (self.kernel, self.file, self.signature, consts, self.options)

    def backend_key(self) -> tuple[Any, ...]:
        """:meth:`config_key` without what an autotune config sets (its constexprs and every launch option): the
        launches of one autotuned call share it, whichever config each is."""
        consts = tuple((k, "<int>" if _is_size(v) else constexpr_text(v)) for k, v in self.constexprs
                       if k not in self.pinned)
        return (self.kernel, self.file, self.signature, consts)

    def sizes(self) -> dict[str, int]:
        """The constexprs :meth:`config_key` collapses (integer sizes not set by an autotune config)."""
        return {k: v for k, v in self.constexprs if _is_size(v) and k not in self.pinned}

    def with_types(self, changes: Mapping[str, str], consts: Mapping[str, Any] | None = None) -> Launch:
        sig = tuple((k, changes.get(k, v)) for k, v in self.signature)
        cs = self.constexprs if not consts else tuple((k, consts.get(k, v)) for k, v in self.constexprs)
        return Launch(self.kernel, self.file, sig, cs, self.options, self.fn, self.pinned)

    def with_config(self, consts: Mapping[str, Any], options: Mapping[str, int]) -> Launch:
        """This launch with an autotune config applied: its constexprs pinned (never collapsed as sizes)."""
        cs = tuple((k, consts.get(k, v)) for k, v in self.constexprs)
        opts = dict(self.options)
        opts.update({k: int(v) for k, v in options.items() if k in _LAUNCH_OPTIONS and v is not None})
        return Launch(self.kernel, self.file, self.signature, cs, tuple(sorted(opts.items())), self.fn,
                      tuple(sorted(set(self.pinned) | set(consts))))


def _is_size(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v not in (0, 1)


def constexpr_text(v: Any) -> str:
    """A constexpr as ``python -m harness compile --const`` reads it back: a ``tl.<attribute>`` for dtypes (the
    attribute, ``tl.float8e5``, not the dtype's own name ``fp8e5``, which ``triton.language`` lacks)."""
    name = getattr(v, "name", None)
    if not (isinstance(name, str) and type(v).__name__ == "dtype"):
        return repr(v)
    import triton.language as tl  # only for a tl.dtype value, which means triton is loaded already

    attrs = sorted(a for a in dir(tl) if not a.startswith("_") and type(getattr(tl, a, None)) is type(v)
                   and getattr(tl, a) == v)
    return f"tl.{name if name in attrs else (attrs[0] if attrs else name)}"


# --- building a Launch from a real call --------------------------------------------------------------------


def launch_from_args(fn: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Launch:
    """The :class:`Launch` for ``fn[grid](*args, **kwargs)``; ``ValueError`` for an argument it cannot type."""
    jit = as_jit(fn)
    pyfn = jit.fn
    opts = tuple(sorted((k, int(kwargs[k])) for k in _LAUNCH_OPTIONS if kwargs.get(k) is not None))
    # a kernel parameter named like an option (the Triton tutorial's softmax takes ``num_stages``) is both, as
    # in Triton's own launch: the value binds to the parameter and is the compile option too
    call_kwargs = {k: v for k, v in kwargs.items() if k not in _LAUNCH_OPTIONS or k in jit.arg_names}
    bound = inspect.signature(pyfn).bind(*args, **call_kwargs)
    bound.apply_defaults()
    is_cexpr = {p.name: bool(p.is_constexpr) for p in jit.params}
    annotated = {p.name: _scalar_annotation(p) for p in jit.params}
    types = _torch_types()
    sig: list[tuple[str, str]] = []
    consts: list[tuple[str, Any]] = []
    for name in jit.arg_names:
        v = bound.arguments.get(name)
        if is_cexpr.get(name) or v is None:
            consts.append((name, v))
        elif hasattr(v, "dtype") and hasattr(v, "data_ptr"):
            ty = _tl_type(v.dtype) if type(v.dtype).__module__.startswith("triton.") else types.get(v.dtype)
            if ty is None:
                raise ValueError(f"{jit.__name__}: argument {name!r} has dtype {v.dtype}, which has no Triton type")
            sig.append((name, "*" + ty))
        elif annotated.get(name) and isinstance(v, (bool, int, float)):
            sig.append((name, annotated[name]))  # Triton's launcher types it by the annotation too
        elif isinstance(v, bool):
            sig.append((name, "i1"))
        elif isinstance(v, int):
            sig.append((name, "i32" if -(2**31) <= v < 2**31 else "i64"))
        elif isinstance(v, float):
            sig.append((name, "fp32"))
        else:
            raise ValueError(f"{jit.__name__}: argument {name!r} is a {type(v).__name__}, which has no Triton type")
    module = getattr(pyfn, "__module__", "") or ""
    kernel = f"{module}.{pyfn.__qualname__}" if module else pyfn.__qualname__
    return Launch(kernel, inspect.getsourcefile(pyfn) or "", tuple(sig), tuple(consts), opts, fn)


_SCALAR_TYPES = frozenset({"i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32",
                           "fp64"})


def _scalar_annotation(param: Any) -> str | None:
    """A scalar's annotated Triton type (``n: tl.int64`` → ``i64``): Triton's launcher types the argument by it."""
    a = getattr(param, "annotation", "")
    return a if isinstance(a, str) and a in _SCALAR_TYPES else None


#: The FP8 formats an FP8 tensor argument or ``tl.dtype`` constexpr is widened to (the NVIDIA ones).
FP8_WIDEN: tuple[str, ...] = ("fp8e4nv", "fp8e5", "fp8e4b15")


def _dtype_type(v: Any) -> str | None:
    """The type string of a ``tl.dtype`` constexpr among the widened ones (``tl.bfloat16`` → ``bf16``)."""
    name = getattr(v, "name", None)
    if type(v).__name__ != "dtype" or not isinstance(name, str):
        return None
    return name if name in WIDEN_DTYPES or name in FP8_WIDEN else None


def _tl_dtype(ty: str) -> Any:
    import triton.language as tl  # only when a dtype constexpr is widened: triton is loaded already

    return {"fp16": tl.float16, "bf16": tl.bfloat16, "fp32": tl.float32, "fp8e4nv": tl.float8e4nv,
            "fp8e5": tl.float8e5, "fp8e4b15": tl.float8e4b15}[ty]


def atomic_pointers(fn: Any) -> frozenset[str]:
    """Pointer arguments of ``fn`` that reach the pointer operand of a ``tl.atomic_*`` call (directly or through
    local pointer arithmetic). Their element type is the kernel's contract: Triton refuses most atomics on
    16-bit floats (``atomic_max does not support fp16``), so widening them reports what cannot be written."""
    return _atomic_pointers(getattr(fn, "fn", fn))


_TRACE_CACHE: dict[Any, _Trace | None] = {}


@dataclass(frozen=True)
class _Trace:
    """What a kernel's source says about its parameters: which names each local is computed from, which names
    reach a ``tl.atomic_*`` pointer, each ``tl.dot_scaled`` scale operand's names with its operand's format (a
    string literal, or the name of the constexpr holding it), the names that divide (``BK // GROUP``), and whether
    it calls ``tl.dot_scaled`` at all."""

    params: frozenset[str]
    flows: Mapping[str, frozenset[str]]
    atomic: frozenset[str]
    scales: tuple[tuple[frozenset[str], tuple[str, str]], ...]  # (names, ("lit"|"name", text))
    divisors: frozenset[str]
    dot_scaled: bool = False
    dot: bool = False

    def params_reaching(self, names: frozenset[str] | set[str]) -> frozenset[str]:
        seen: set[str] = set()
        todo = list(names)
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            todo += self.flows.get(n, ())
        return frozenset(seen & self.params)


def _arg(node: Any, index: int, keyword: str) -> Any:
    if len(node.args) > index:
        return node.args[index]
    return next((k.value for k in node.keywords if k.arg == keyword), None)


def _trace(pyfn: Any) -> _Trace | None:
    import ast
    import textwrap

    code = getattr(pyfn, "__code__", None)
    if code is None:
        return None
    if code in _TRACE_CACHE:
        return _TRACE_CACHE[code]
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(pyfn)))
    except (OSError, TypeError, SyntaxError):
        _TRACE_CACHE[code] = None
        return None

    def names(node: Any) -> set[str]:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}

    flows: dict[str, set[str]] = {}  # local name -> names its value is computed from
    atomic: set[str] = set()
    scales: list[tuple[frozenset[str], tuple[str, str]]] = []
    divisors: set[str] = set()
    dot_scaled = dot = False
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            used = names(node.value)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in names(t):
                    flows.setdefault(n, set()).update(used)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv) and isinstance(node.right, ast.Name):
            divisors.add(node.right.id)
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if isinstance(name, str) and name.startswith("atomic_"):
                ptr = _arg(node, 0, "pointer")
                if ptr is not None:
                    atomic |= names(ptr)
            elif name == "dot":
                dot = True
            elif name == "dot_scaled":  # dot_scaled(lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, ...)
                dot_scaled = True
                for i, side in ((1, "lhs"), (4, "rhs")):
                    scale, fmt = _arg(node, i, f"{side}_scale"), _arg(node, i + 1, f"{side}_format")
                    if scale is None or fmt is None:
                        continue
                    if isinstance(fmt, ast.Constant) and isinstance(fmt.value, str):
                        scales.append((frozenset(names(scale)), ("lit", fmt.value)))
                    elif isinstance(fmt, ast.Name):
                        scales.append((frozenset(names(scale)), ("name", fmt.id)))
    params = frozenset(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    out = _Trace(params, {k: frozenset(v) for k, v in flows.items()}, frozenset(), tuple(scales),
                 frozenset(divisors) & params)
    out = _Trace(params, out.flows, out.params_reaching(atomic), out.scales, out.divisors, dot_scaled, dot)
    _TRACE_CACHE[code] = out
    return out


def _atomic_pointers(pyfn: Any) -> frozenset[str]:
    t = _trace(pyfn)
    return frozenset() if t is None else t.atomic


#: The scale types of a ``tl.dot_scaled`` e2m1 operand, by the scale pointer's type: MX's e8m0 (bytes, one scale
#: per 32 elements along K) and NVFP4's e4m3 (``float8e4nv``, one per 16). Triton takes the scale type from the
#: scale tensor's dtype and the group from its shape (3.6 asserts it: ``lhs_scale must be a tensor of shape``);
#: the format string stays ``"e2m1"``.
SCALE_TYPES: dict[str, tuple[str, int]] = {"*u8": ("e8m0", 32), "*fp8e4nv": ("e4m3", 16)}
#: How the label of a :func:`variants` entry that swaps a ``tl.dot_scaled``'s scale type begins.
SCALE_LABEL = "scales="


def calls_dot_scaled(launch: Launch) -> bool:
    """Whether the launched kernel's source calls ``tl.dot_scaled`` (read as :func:`scale_pointers` reads it):
    then its compiles record whether each target lowers it natively or emulated
    (:func:`harness.compile.lowering.ptx_lowering`)."""
    t = _trace(getattr(launch.fn, "fn", launch.fn)) if launch.fn is not None else None
    return t is not None and t.dot_scaled


def calls_dot(launch: Launch) -> bool:
    """Whether the launched kernel's source calls ``tl.dot`` (by name, as :func:`calls_dot_scaled` reads it)."""
    t = _trace(getattr(launch.fn, "fn", launch.fn)) if launch.fn is not None else None
    return t is not None and t.dot


def scale_pointers(launch: Launch) -> dict[str, str]:
    """Pointer arguments of the launch that reach a ``tl.dot_scaled`` scale operand of an e2m1 operand (directly or
    through loads and local arithmetic), each with its scale type (``as_ptr`` → ``"e8m0"``): the launch's scale
    type, which :func:`variants` widens. A format held in a constexpr is read from the launch."""
    t = _trace(getattr(launch.fn, "fn", launch.fn)) if launch.fn is not None else None
    if t is None:
        return {}
    consts = dict(launch.constexprs)
    sig = launch.sig
    out: dict[str, str] = {}
    for used, (how, text) in t.scales:
        fmt = text if how == "lit" else getattr(consts.get(text), "value", consts.get(text))
        if fmt != "e2m1":
            continue
        for p in t.params_reaching(used):
            if sig.get(p) in SCALE_TYPES:
                out[p] = SCALE_TYPES[sig[p]][0]
    return out


def _scale_variant(launch: Launch, scales: Mapping[str, str], divisors: frozenset[str]) -> tuple[str, Launch] | None:
    """The launch with its other scale type (e8m0 ↔ e4m3): every scale pointer retyped together, and the group
    constexprs (integer constexprs the kernel divides by, equal to the launch's group size) set to the other
    group. ``None`` when the scale pointers disagree, or when a divisor already holds the other group (the
    kernel converts its scales itself, as ``kernels/mx/gemm.py`` does under ``NVFP4``)."""
    sig = launch.sig
    kinds = {sig[p] for p in scales}
    if len(kinds) != 1:
        return None
    (src,) = kinds
    dst = next(k for k in SCALE_TYPES if k != src)
    src_group, (dst_name, dst_group) = SCALE_TYPES[src][1], SCALE_TYPES[dst]
    ints = {k: v for k, v in launch.constexprs if k in divisors and isinstance(v, int) and not isinstance(v, bool)}
    if dst_group in ints.values():
        return None
    groups = sorted(k for k, v in ints.items() if v == src_group)
    ptrs = sorted(scales)
    label = (f"{SCALE_LABEL}{dst_name}(" + ",".join(ptrs) + f"={dst[1:]}"
             + "".join(f",{g}={dst_group}" for g in groups) + ")")
    return label, launch.with_types({p: dst for p in ptrs}, {g: dst_group for g in groups})


def variants(launch: Launch) -> list[tuple[str, Launch]]:
    """Widened variants, each a launch the kernel's callers could make:

    - each floating-point tensor argument alone in each other source dtype (fp16/bf16/fp32), then all of them
      together (``key_ptr=bf16``, ``all=bf16``); the FP8 tensor arguments of one format, together, in each
      other FP8 format (``out_ptr=fp8e5``, ``x,z=fp8e5``): they come from one choice of format, and one of them
      alone in another format is an FP8 → FP8 conversion no launch makes (Triton 3.6 lowers it on no target);
    - a ``tl.dtype`` constexpr equal to a widened pointer's element type changes with it (torchao's
      ``input_dtype: tl.constexpr`` set from the tensor's dtype: ``x_ptr=bf16+input_dtype``); when several
      pointers share that type, only the ``all=`` variants change it;
    - an FP8 ``tl.dtype`` constexpr no pointer is coupled to (a store's output format) in each other FP8 format
      (``FMT=fp8e5``);
    - pointers that reach a ``tl.atomic_*`` call keep their type (:func:`atomic_pointers`);
    - the scale pointers of a ``tl.dot_scaled`` on e2m1 operands (:func:`scale_pointers`) in the other scale
      type, together, with the group constexpr: MX's e8m0 bytes per 32 ↔ NVFP4's e4m3 per 16
      (``scales=e4m3(as_ptr,bs_ptr=fp8e4nv,GROUP=16)``); they are never widened as FP8 tensors.

    Duplicates of the launch or of each other are dropped."""
    sig = launch.sig
    atomic = atomic_pointers(launch.fn) if launch.fn is not None else frozenset()
    scales = scale_pointers(launch)
    floats = [p for p in launch.float_pointers() if p not in atomic]
    fp8s = [k for k, v in launch.signature if v.startswith("*") and v[1:] in FP8_WIDEN and k not in atomic
            and k not in scales]
    dtype_consts = {k: t for k, v in launch.constexprs if (t := _dtype_type(v)) is not None}
    ptr_types = [sig[p][1:] for p in floats + fp8s]

    def coupled(p: str) -> list[str]:  # the constexprs that follow pointer p alone
        ty = sig[p][1:]
        return [k for k, t in dtype_consts.items() if t == ty] if ptr_types.count(ty) == 1 else []

    out: list[tuple[str, Launch]] = []
    seen = {(launch.signature, launch.constexprs)}

    def add(label: str, v: Launch) -> None:
        ident = (v.signature, v.constexprs)
        if ident not in seen:
            seen.add(ident)
            out.append((label, v))

    for p in floats:
        cs = coupled(p)
        for d in WIDEN_DTYPES:
            add(f"{p}={d}" + "".join(f"+{c}" for c in cs),
                launch.with_types({p: "*" + d}, {c: _tl_dtype(d) for c in cs}))
    fp8_groups: dict[str, list[str]] = {}
    for p in fp8s:
        fp8_groups.setdefault(sig[p][1:], []).append(p)
    for fmt, group in fp8_groups.items():
        cs = [k for k, t in dtype_consts.items() if t == fmt]
        for d in FP8_WIDEN:
            add(",".join(group) + f"={d}" + "".join(f"+{c}" for c in cs),
                launch.with_types({p: "*" + d for p in group}, {c: _tl_dtype(d) for c in cs}))
    if len(floats) > 1:
        launched = {sig[p][1:] for p in floats}
        cs = [k for k, t in dtype_consts.items() if t in launched]
        for d in WIDEN_DTYPES:
            add(f"all={d}" + "".join(f"+{c}" for c in cs),
                launch.with_types({p: "*" + d for p in floats}, {c: _tl_dtype(d) for c in cs}))
    followers = {c for p in floats + fp8s for c in coupled(p)}
    if len(floats) > 1:
        followers |= {k for k, t in dtype_consts.items() if t in {sig[p][1:] for p in floats}}
    for c, t in dtype_consts.items():
        if c in followers or t not in FP8_WIDEN or any(sig[p][1:] == t for p in fp8s):
            continue
        for d in FP8_WIDEN:
            add(f"{c}={d}", launch.with_types({}, {c: _tl_dtype(d)}))
    if scales:
        trace = _trace(getattr(launch.fn, "fn", launch.fn))
        sv = _scale_variant(launch, scales, trace.divisors if trace is not None else frozenset())
        if sv is not None:
            add(*sv)
    return out


#: How many "together" combinations :func:`flag_variants` adds at most (one per alternative of the dtype flag with
#: the most alternatives, every bool flag flipped in each).
MAX_TOGETHER = 3


def code_flags(launch: Launch) -> dict[str, list[Any]]:
    """The launch's code-selecting constexprs, each with the values this launch did not use: a ``bool`` or 0/1
    integer flag (the other value) and a ``tl.dtype`` constexpr that no pointer argument's type decides, over
    the types of its kind (fp16/bf16/fp32, or the NVIDIA FP8 formats). Constexprs an autotune config set are
    the config's, not a launcher's: left out."""
    sig_types = {v.lstrip("*") for _, v in launch.signature}
    out: dict[str, list[Any]] = {}
    for k, v in launch.constexprs:
        if k in launch.pinned:
            continue
        if isinstance(v, bool):
            out[k] = [not v]
        elif isinstance(v, int) and v in (0, 1):
            out[k] = [1 - v]
        elif (t := _dtype_type(v)) is not None and t not in sig_types:
            kinds = FP8_WIDEN if t in FP8_WIDEN else WIDEN_DTYPES
            out[k] = [_tl_dtype(d) for d in kinds if d != t]
    return out


def flag_variants(launch: Launch) -> list[tuple[tuple[tuple[str, Any], ...], Launch]]:
    """Launches a launcher could make on another GPU: the launch with its :func:`code_flags` set to the values it
    did not use, each flag alone (every other value of it), then all flags together (every bool flag flipped,
    each dtype flag at its 1st, 2nd... other value, at most :data:`MAX_TOGETHER` of these). Each comes with its
    changes, in the launch's constexpr order. Why bounded so: a flag's branch is usually guarded by that flag
    alone, or by flags a launcher sets together from one device check (``E4B15`` with ``FP8=e4b15``); the
    full product grows as 2^n."""
    flags = code_flags(launch)
    if not flags:
        return []
    combos: list[dict[str, Any]] = [{k: v} for k, vs in flags.items() for v in vs]
    if len(flags) > 1:
        width = min(MAX_TOGETHER, max(len(vs) for vs in flags.values()))
        combos += [{k: vs[min(i, len(vs) - 1)] for k, vs in flags.items()} for i in range(width)]
    out: list[tuple[tuple[tuple[str, Any], ...], Launch]] = []
    seen: set[Any] = set()
    for c in combos:
        v = launch.with_types({}, c)
        if v.constexprs in seen:
            continue
        seen.add(v.constexprs)
        out.append((tuple((k, c[k]) for k, _ in launch.constexprs if k in c), v))
    return out


def pointer_variants(launch: Launch) -> list[tuple[str, Launch]]:
    """The floating-point tensor arguments of ``launch`` in the other source dtypes, for a :func:`flag_variants`
    launch: the one pointer alone (``key_ptr=bf16``), or all of them together (``all=bf16``) when there are
    several (each alone is what :func:`variants` does for the launch as run; here it would multiply the flag
    combinations). Pointers that reach an atomic keep their type."""
    atomic = atomic_pointers(launch.fn) if launch.fn is not None else frozenset()
    floats = [p for p in launch.float_pointers() if p not in atomic]
    if not floats:
        return []
    sig = launch.sig
    if len(floats) == 1:
        (p,) = floats
        return [(f"{p}={d}", launch.with_types({p: "*" + d})) for d in WIDEN_DTYPES if sig[p] != "*" + d]
    return [(f"all={d}", launch.with_types({p: "*" + d for p in floats})) for d in WIDEN_DTYPES
            if any(sig[p] != "*" + d for p in floats)]


def flag_text(changes: tuple[tuple[str, Any], ...]) -> str:
    """``E4B15=1, FP8=tl.float8e4b15``: a flag combination as a user would write the constexprs."""
    return ", ".join(f"{k}={int(v) if isinstance(v, bool) else constexpr_text(v)}" for k, v in changes)


# --- capture and declarations: per session -----------------------------------------------------------------

#: The name of the session section that holds a session's :class:`CaptureState` (and capture's report).
SECTION = "compile_launches"


@dataclass(frozen=True)
class _Declared:
    kernel: str
    targets: tuple[str, ...]  # empty: every target
    match: re.Pattern[str]
    reason: str


class Declarations:
    """The failures declared with :func:`expect_compile_failure` (skipped in the capture report, not failed) and
    the targets declared with :func:`skip_compile` (never compiled)."""

    def __init__(self) -> None:
        self._items: list[_Declared] = []
        self._skips: list[tuple[str, tuple[str, ...], str]] = []
        self.min_target: str | None = None  # the project's lowest supported CUDA target (harness_min_target)
        self.below_min: dict[tuple[str, str], str] = {}  # (kernel, target) -> a failure reported, not failed

    def set_min_target(self, target: str) -> None:
        """Failures on CUDA targets below ``target`` are reported, not failed: the project does not support them."""
        t = parse_targets([target])[0]
        if t.backend != "cuda" or t.cc is None:
            raise ValueError(f"{target!r}: expected a CUDA target such as sm80")
        self.min_target = t.name

    def add(self, kernel: str, targets: tuple[str, ...], match: str, reason: str) -> None:
        self._items.append(_Declared(kernel, targets, re.compile(match), reason))

    def add_skip(self, kernel: str, targets: tuple[str, ...], reason: str) -> None:
        self._skips.append((kernel, targets, reason))

    @staticmethod
    def _names(launch: Launch) -> tuple[str, str]:
        """What a declaration may name the launch's kernel by: in full, or by its short name."""
        return launch.kernel, launch.kernel.rsplit(".", 1)[-1]

    def skip_reason(self, launch: Launch, target: str) -> str | None:
        """Why ``launch`` is not compiled for ``target`` (:func:`skip_compile`), or ``None``."""
        names = self._names(launch)
        for kernel, targets, reason in self._skips:
            if kernel in names and target in targets:
                return reason
        return None

    def reason(self, launch: Launch, target: str, error_line: str) -> str | None:
        """Why this failure was declared expected, or ``None``."""
        names = self._names(launch)
        for d in self._items:
            if d.kernel in names and (not d.targets or target in d.targets) and d.match.search(error_line):
                return d.reason
        if self.min_target is not None:
            t, low = parse_targets([target])[0], parse_targets([self.min_target])[0]
            if t.backend == "cuda" and t.cc is not None and t.cc < (low.cc or 0):
                self.below_min.setdefault((launch.kernel, t.name), error_line)
                return f"below the project's lowest target {self.min_target} (harness_min_target)"
        return None


class Captured(list):  # noqa: FURB189 - a list with what a replay needs
    """The launches one :meth:`CaptureState.capture` block saw (a list, in order, duplicates included), and the
    launcher calls that asked ``torch.cuda`` about the device (:attr:`replays`, for
    :mod:`harness.compile.personality`)."""

    def __init__(self, test_code: Any = None) -> None:
        super().__init__()
        self.test_code = test_code
        self.replays: list[Any] = []
        self._frames: list[Any] = []  # kept alive while the block is open: their ids name the calls

    def add_replay(self, frame: Any, call: Any) -> None:
        if not any(f is frame for f in self._frames):
            self._frames.append(frame)
            self.replays.append(call)

    def close(self) -> None:
        self._frames.clear()


class CaptureState:
    """What launch capture keeps for one session: the open :func:`capture` blocks (the innermost one takes a
    launch), the launches that could not be typed (kernel → why; the summary lists them), the
    :class:`Declarations` and the device queries of the running test
    (:class:`harness.compile.personality.DeviceQueries`). The harness plugin registers one per pytest session
    as its ``compile_launches`` section."""

    def __init__(self) -> None:
        from harness.compile.personality import DeviceQueries

        self._lock = threading.Lock()
        self._sinks: list[Captured] = []
        self.skipped: dict[str, str] = {}
        self.declarations = Declarations()
        self.queries = DeviceQueries()
        #: called with each launch a test makes as run (not a replay's): the coverage map reads them here
        self.listeners: list[Callable[[Launch], None]] = []

    @contextlib.contextmanager
    def capture(self, test_code: Any = None) -> Iterator[Captured]:
        """Record every interpreted kernel launch inside the block (in order, duplicates included); a nested
        block takes the launches made inside it, the outer one does not see them. With ``test_code`` (the test
        function's code object), the launcher calls that asked ``torch.cuda`` about the device before a launch
        are kept for replay."""
        got = Captured(test_code)
        with Patch.context() as patch:
            # for the block only (outside one, launches run unwatched); a test that imports Triton inside the
            # block gets the wrapper then
            after_import(patch, "triton", lambda: _install(patch), tag=CAPTURE_TAG)
            with self._lock:
                self._sinks.append(got)
            try:
                yield got
            finally:
                with self._lock:  # by identity: two blocks' lists may be equal
                    del self._sinks[next(i for i, x in enumerate(self._sinks) if x is got)]

    def _sink(self) -> Captured | None:
        with self._lock:
            return self._sinks[-1] if self._sinks else None

    def record(self, fn: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> bool:
        """Take one interpreted launch into the innermost block (with every config of an autotuner running
        it); ``True`` when the kernel must not run (a replay under a device personality records only)."""
        sink = self._sink()
        if sink is None:
            return False
        from harness.compile.autotune import config_values, configs_in_flight

        try:
            launch = launch_from_args(fn, args, kwargs)
        except Exception as e:  # never break the test over capture; say so in the summary
            self.skipped[getattr(fn, "__name__", "?")] = f"{type(e).__name__}: {e}"
            return self.queries.active is not None
        if self.queries.active is None:
            for listen in self.listeners:
                listen(launch)
        configs = configs_in_flight()
        if configs:
            for c in configs:
                sink.append(launch.with_config(*config_values(c)))
        else:
            sink.append(launch)
        if self.queries.active is not None:
            return True
        if self.queries.asked and sink.test_code is not None:
            from harness.compile.personality import replay_root

            root = replay_root(sink.test_code, _skip_files())
            if root is not None:
                sink.add_replay(*root)
        return False


@functools.cache
def _skip_files() -> tuple[str, ...]:
    """Where a launcher is not: Triton's runtime (a test launching a kernel itself) and the harness."""
    import os

    import triton

    import harness

    return (os.path.dirname(triton.__file__), os.path.dirname(harness.__file__))


_PROCESS = CaptureState()  # outside any pytest session: python -m harness compile, a script


def state() -> CaptureState:
    """The running session's capture state (its ``compile_launches`` section), else the process's own."""
    s = current()
    section = s.sections.get(SECTION) if s is not None else None
    return section if isinstance(section, CaptureState) else _PROCESS


def capture() -> contextlib.AbstractContextManager[list[Launch]]:
    """:meth:`CaptureState.capture` of the running session's state."""
    return state().capture()


def expect_compile_failure(kernel: Any, *targets: str, match: str = "", reason: str = "") -> None:
    """Declare that ``kernel`` (the ``@triton.jit`` object or its name) is known not to compile for
    ``targets`` (all targets when none are given) with an error matching ``match``: those results are skipped
    in the capture report, not failed. Call it next to the kernel or in a conftest; a declaration made in a
    pytest session ends with it."""
    if not reason:
        raise ValueError("expect_compile_failure: reason= must say why the failure is expected")
    name = _kernel_name(kernel, "expect_compile_failure")
    names = tuple(t.name for t in parse_targets(targets)) if targets else ()
    state().declarations.add(name, names, match, reason)


def _kernel_name(kernel: Any, caller: str) -> str:
    """The name a declaration keeps for ``kernel`` (a ``@triton.jit`` object, or its name)."""
    name = kernel if isinstance(kernel, str) else getattr(getattr(kernel, "fn", kernel), "__qualname__", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{caller}: kernel must be a @triton.jit kernel or its name, got {kernel!r}")
    return name


def skip_compile(kernel: Any, *targets: str, reason: str = "") -> None:
    """Declare that launch capture compiles ``kernel`` for none of ``targets``: the kernel refuses to run there
    (its own host-side check), so a compile for them checks nothing a launch can reach, and may cost minutes
    (kernels/mx's GEMM: Triton's FMA fallback for sm75 took 206 s a launch on Triton 3.6). Those cells read ``-``
    in the matrix. Call it next to the kernel's tests or in a conftest; a declaration made in a pytest session
    ends with it."""
    if not reason:
        raise ValueError("skip_compile: reason= must say why the kernel never runs on those targets")
    if not targets:
        raise ValueError("skip_compile: name the targets (e.g. 'sm75'); a kernel compiled nowhere is no test")
    name = _kernel_name(kernel, "skip_compile")
    state().declarations.add_skip(name, tuple(t.name for t in parse_targets(targets)), reason)


def _install(patch: Patch) -> None:
    """Wrap the interpreter's launch, through ``patch``, unless an enclosing capture block already did; the
    wrapper hands each launch to the current session's innermost capture block. Why wrap ``run``: it is the one
    call every interpreted launch makes, with the arguments as given."""
    from triton.runtime import interpreter as itp  # on first capture only: loading the plugin imports no triton

    cls = itp.InterpretedFunction
    if installed(cls, "run", CAPTURE_TAG):
        return
    orig = cls.run

    def run(self: Any, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> Any:
        st = state()
        sink = None if warmup else st._sink()
        recorded = len(sink) if sink is not None else 0
        if not warmup and st.record(self, args, kwargs):
            return None  # a replay under a device personality: the launch is recorded, not run
        try:
            return orig(self, *args, grid=grid, warmup=warmup, **kwargs)
        except BaseException:
            # A launch the interpreter refused (test_core's test_bitwise_op asserts that fp16 | int8 raises) is no
            # launch a GPU makes: compiling it would report the refusal the test expects as a finding.
            if sink is not None:
                del sink[recorded:]
            raise

    patch.setattr(cls, "run", run, tag=CAPTURE_TAG)
