"""A generator of small ``@triton.jit`` kernels, from a grammar of what kernels do, for differential testing.

Why: the interpreter shims (casts, bf16 arithmetic, approximate math, dots) sit between every kernel and
Triton's interpreter, and a kernel that Triton runs must never fail because of them. Hand-written tests cover
the kernels someone thought of; this writes the others: masked and unmasked 1-D and 2-D loads and stores,
element ops and casts among fp32/fp16/bf16/FP8/int32, every reduction and scan on any axis with or without
``keep_dims`` (user combines included), small ``tl.dot``, atomics and loops, launched with 1-16 warps, on
inputs full of NaN, signed zeros, infinities, subnormals and ties.

:func:`generate` maps a seed to one :class:`Case` (kernel source, inputs, launch parameters) and
:func:`cases` yields a run of them, so the same kernels can be launched anywhere (the CPU differential test,
a GPU comparison). :func:`draw_case` builds one from any ``random.Random``, hypothesis' ``st.randoms()``
included, which then shrinks the grammar's choices.

A case also names the documented GPU models its ops engage (:attr:`Case.models`): where the plugin and the
plain interpreter differ, only these may explain it.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

__all__ = ["Case", "MODELS", "OP_CLASSES", "cases", "draw_case", "generate", "load_kernel"]

#: The documented GPU models a generated kernel can engage, and what each one changes.
MODELS: dict[str, str] = {
    "bf16": "bf16 arithmetic, reductions and conversions rounded as the GPU rounds them (harness.interp.arith)",
    "fp8": "FP8 conversions as the arch lowers them (harness.interp.casts, harness.fp8)",
    "approx": "fp32 `/`, exp, log, sqrt, rsqrt as the GPU approximates them (harness.interp.approx_math)",
    "dot": "tl.dot as the arch's tensor cores compute it (harness.interp.dots, harness.tensor_cores)",
    "nan_minmax": "tl.maximum/minimum of a NaN and a number give the number (max/min.f32, max/min.bf16), as "
                  "the GPU does; Triton 3.6's interpreter propagates the NaN (harness.interp.arith)",
    "atomic_f16": "fp16/bf16 atomic_add: one rounding per update, overflow to inf, as atom.add.noftz.f16/bf16 "
                  "(harness.interp.arith)",
    "nan_reduce": "max/min/argmax/argmin of an all-NaN slice as the GPU's combine tree gives it "
                  "(harness.interp.arith)",
    "fp_to_int": "float-to-integer conversions saturated, NaN to 0, as cvt.rzi (harness.interp.arith)",
    "canonical_nan": "a NaN out of fp arithmetic (+ - * / %, fma) is the canonical word, as the GPU writes it "
                     "(harness.interp.arith)",
    "lowering": "fp multiply-adds contracted into one fma, reductions and scans in the order of the kernel "
                "compiled for the arch (harness.interp.lowering)",
}

#: Op classes, as counted in a run's report.
OP_CLASSES = ("elementwise", "cast", "reduce", "scan", "dot", "atomic", "loop")

_TL = {"fp32": "tl.float32", "fp16": "tl.float16", "bf16": "tl.bfloat16", "i32": "tl.int32",
       "e4m3": "tl.float8e4nv", "e5m2": "tl.float8e5"}
_TORCH = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32,
          "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
_FLOATS = ("fp32", "fp16", "bf16")
_REDUCE_OPS = ("sum", "max", "min", "argmax", "argmin", "max_idx", "min_idx", "xor_sum", "reduce")
_SCAN_OPS = ("cumsum", "cumprod", "associative_scan")
_ATOMIC_OPS = ("add", "max", "min", "xchg", "cas")

#: User combine functions for tl.reduce / tl.associative_scan: (body, the dtypes it takes).
_COMBINES = {
    "add": ("return a + b", ("fp32", "fp16", "bf16", "i32")),
    "mul": ("return a * b", ("fp32", "fp16", "bf16", "i32")),
    # .to(a.dtype): Triton 3.6's tl.maximum/minimum return fp32 for bf16, which tt.reduce/scan refuse
    "max": ("return tl.maximum(a, b).to(a.dtype)", ("fp32", "fp16", "bf16", "i32")),
    "min": ("return tl.minimum(a, b).to(a.dtype)", ("fp32", "fp16", "bf16", "i32")),
    "xor": ("return a ^ b", ("i32",)),
    "absmax": ("return tl.where(tl.abs(a) >= tl.abs(b), a, b)", ("fp32", "fp16", "bf16", "i32")),
}


@dataclass
class Case:
    """One generated kernel with its launch: ``kernel[grid](*args(), **constexprs, num_warps=num_warps)``.

    ``tensors`` holds every pointer argument's initial contents (outputs prefilled with a pattern), CPU tensors
    to copy to the device; ``scalars`` the runtime integer arguments, in signature order after the pointers."""

    seed: int | None
    op_class: str
    op: str
    source: str
    tensors: dict[str, torch.Tensor]
    outputs: tuple[str, ...]
    scalars: dict[str, int]
    constexprs: dict[str, Any]
    grid: tuple[int, ...]
    num_warps: int
    models: frozenset[str] = field(default_factory=frozenset)
    name: str = "kernel"

    def args(self, device: str | torch.device = "cpu") -> list[Any]:
        """Fresh copies of the arguments, in signature order."""
        return [t.clone().to(device) for t in self.tensors.values()] + list(self.scalars.values())

    def describe(self) -> str:
        lines = [f"op class {self.op_class} ({self.op}), grid {self.grid}, num_warps {self.num_warps}, "
                 f"constexprs {self.constexprs}, scalars {self.scalars}"]
        for n, t in self.tensors.items():
            lines.append(f"  {n}: {str(t.dtype).removeprefix('torch.')}{list(t.shape)}"
                         f"{' (output)' if n in self.outputs else ''}")
        return "\n".join(lines)


def generate(seed: int) -> Case:
    """The case of ``seed``: the same kernel, inputs and launch on every machine and run."""
    case = draw_case(random.Random(seed))
    case.seed = seed
    return case


def cases(seed: int, count: int) -> Iterator[Case]:
    """``count`` cases, of seeds ``seed``, ``seed + 1``, ..."""
    for s in range(seed, seed + count):
        yield generate(s)


def load_kernel(case: Case, directory: str | Path | None = None) -> Any:
    """Import the case's kernel from a file (Triton's jit reads the source of what it decorates).

    The file is named by the seed and a hash of the source, and by default lives in the harness's cache
    directory (``kernelgen/`` beside the compile cache): the lowering facts of a launch are cached by its
    kernel's path, so a rerun of the same seeds finds them instead of compiling every kernel again."""
    import hashlib
    import os

    if directory is None:
        from harness.compile.disk_cache import cache_dir

        directory = cache_dir() / "kernelgen"
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(case.source.encode()).hexdigest()[:16]
    tag = f"{case.seed}_{digest}" if case.seed is not None else f"x{digest}"
    path = directory / f"kernelgen_{tag}.py"
    try:
        same = path.read_text() == case.source
    except OSError:
        same = False
    if not same:  # written whole, then renamed: a parallel worker never reads half a file
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(case.source)
        os.replace(tmp, path)
    # the module name is part of the cache key of the kernel's launches (lowering facts): named by the file alone,
    # a rerun of the same seeds reads them from the disk cache instead of compiling each kernel
    name = f"_kernelgen_{tag}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton's jit looks functions up through their module
    spec.loader.exec_module(module)
    return getattr(module, case.name)


# --- the grammar ------------------------------------------------------------------------------------------


class _Builder:
    """Writes one kernel: pointer parameters, body lines, the models its ops engage."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.params: list[str] = []
        self.tensors: dict[str, torch.Tensor] = {}
        self.outputs: list[str] = []
        self.scalars: dict[str, int] = {}
        self.constexprs: dict[str, Any] = {}
        self.body: list[str] = []
        self.helpers: list[str] = []
        self.models: set[str] = set()

    def line(self, text: str) -> None:
        self.body.append("    " + text)

    def pointer(self, name: str, tensor: torch.Tensor, output: bool = False) -> str:
        self.params.append(name)
        self.tensors[name] = tensor
        if output:
            self.outputs.append(name)
        if tensor.dtype == torch.bfloat16:
            self.models.add("bf16")
        return name

    def source(self) -> str:
        sig = ", ".join(self.params + list(self.scalars) + [f"{k}: tl.constexpr" for k in self.constexprs])
        head = "import triton\nimport triton.language as tl\n\n"
        helpers = "".join(f"\n@triton.jit\n{h}\n\n" for h in self.helpers)
        return f"{head}{helpers}\n@triton.jit\ndef kernel({sig}):\n" + "\n".join(self.body) + "\n"

    # -- values -------------------------------------------------------------------------------------------

    def data(self, dt: str, shape: tuple[int, ...]) -> torch.Tensor:
        """Inputs with the values that break models: NaN, +-0, +-inf, subnormals, ties, the largest finite."""
        rng = self.rng
        n = 1
        for s in shape:
            n *= s
        g = torch.Generator().manual_seed(rng.getrandbits(62))
        if dt == "i32":
            lo, hi = rng.choice([(-8, 9), (-1000, 1001), (-(2**31), 2**31)])
            return torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(torch.int32)
        style = rng.choice(["normal", "normal", "ties", "wide"])
        if style == "ties":
            x = torch.randint(-4, 5, (n,), generator=g).double() * rng.choice([1.0, 0.5, 0.25])
        elif style == "wide":
            x = torch.randn(n, generator=g, dtype=torch.float64) * torch.exp2(torch.randint(-30, 30, (n,),
                                                                                             generator=g).double())
        else:
            x = torch.randn(n, generator=g, dtype=torch.float64) * 2.0 ** rng.randint(-4, 4)
        target = _TORCH[dt]
        fi = torch.finfo(target)
        specials = torch.tensor([float("nan"), 0.0, -0.0, float("inf"), -float("inf"), fi.smallest_normal / 4,
                                 -fi.smallest_normal / 2, fi.max, -fi.max, fi.tiny, 1.0, -1.0], dtype=torch.float64)
        rate = rng.choice([0.0, 0.0, 0.05, 0.3])
        if rate:
            pick = torch.rand(n, generator=g) < rate
            x[pick] = specials[torch.randint(0, len(specials), (int(pick.sum()),), generator=g)]
        x = x.reshape(shape)
        if len(shape) == 2 and rng.random() < 0.25:  # a row all NaN
            x[rng.randrange(shape[0])] = float("nan")
        elif rng.random() < 0.05:
            x[:] = float("nan")
        return x.to(target)

    def out_buffer(self, dt: str, shape: tuple[int, ...]) -> torch.Tensor:
        # a recognizable pattern: an element no store reaches keeps it on both sides
        if dt == "i32":
            return torch.full(shape, -7, dtype=torch.int32)
        return torch.full(shape, 7.0, dtype=_TORCH[dt])

    # -- element expressions ------------------------------------------------------------------------------

    def expr(self, dt: str, leaves: dict[str, str], depth: int) -> str:
        """A tensor expression of dtype ``dt`` over ``leaves`` (name -> dtype); constants appear only as the
        second operand of a binary op, so the expression is a tensor (``.to`` applies)."""
        rng = self.rng
        same = [n for n, d in leaves.items() if d == dt]
        if depth <= 0 or rng.random() < 0.2:
            return rng.choice(same) if same else self.cast_to(dt, leaves, 0)
        if rng.random() < 0.2:
            return self.cast_to(dt, leaves, depth - 1)

        def sub() -> str:
            return self.expr(dt, leaves, depth - 1)

        def rhs() -> str:
            if rng.random() < 0.2:
                return rng.choice(["1", "2", "-3"]) if dt == "i32" else rng.choice(["0.5", "1.5", "-2.0", "0.1"])
            return sub()

        if dt == "i32":
            form = rng.choice(["+", "-", "*", "&", "|", "^", "where", "minimum", "maximum", "abs", "neg"])
        else:
            form = rng.choice(["+", "-", "*", "/", "muladd", "fma", "where", "minimum", "maximum", "clamp", "abs",
                               "neg"] + (["exp", "log", "sqrt", "rsqrt"] if dt == "fp32" else []))
        if form in ("+", "-", "*", "/", "muladd", "fma") and dt != "i32":
            self.models.add("canonical_nan")
        if form in ("+", "-", "*", "&", "|", "^"):
            if form == "*" and dt != "i32":
                self.models.add("lowering")  # a product an enclosing add may take: one fma on the GPU
            return f"({sub()} {form} {rhs()})"
        if form == "/":
            self.models.add("approx")  # fp16/bf16 divide in fp32 too (div.full.f32)
            return f"({sub()} / {rhs()})"
        if form == "muladd":
            self.models.add("lowering")
            return f"({sub()} * {rhs()} + {sub()})"
        if form == "fma":
            return f"tl.fma({sub()}, {sub()}, {sub()})"
        if form == "where":
            return f"tl.where({sub()} < {rhs()}, {sub()}, {sub()})"
        if form in ("minimum", "maximum"):
            if dt != "i32":
                self.models.add("nan_minmax")
            return f"tl.{form}({sub()}, {sub()})"
        if form == "clamp":  # tt.clampf: max then min (max/min.f32), bounds in either order
            self.models.add("nan_minmax")
            return f"tl.clamp({sub()}, {sub()}, {sub()})"
        if form == "abs":
            return f"tl.abs({sub()})"
        if form == "neg":
            return f"(-{sub()})"
        self.models.add("approx")
        return f"tl.{form}({sub()})"

    def cast_to(self, dt: str, leaves: dict[str, str], depth: int) -> str:
        """``dt`` from another dtype: a cast of an expression over a leaf of another dtype (if any; else a
        round trip through one), at times through FP8 and back."""
        rng = self.rng
        names = [n for n, d in leaves.items() if d != dt] or list(leaves)
        src = leaves[rng.choice(names)]
        inner = f"({self.expr(src, leaves, depth)})"
        if src == dt:
            via = rng.choice([d for d in ("fp32", "fp16", "bf16", "i32") if d != dt])
            if via == "i32":
                self.models.add("fp_to_int")
            inner, src = f"{inner}.to({_TL[via]})", via
        if "bf16" in (src, dt):
            self.models.add("bf16")
        if src != "i32" and dt == "i32":
            self.models.add("fp_to_int")
        if src != "i32" and dt != "i32" and rng.random() < 0.4:  # through FP8 and back
            self.models.add("fp8")
            return f"{inner}.to({_TL[rng.choice(['e4m3', 'e5m2'])]}).to({_TL[dt]})"
        if src == "fp32" and dt in ("fp16", "bf16") and rng.random() < 0.5:  # cvt.rz
            return f'{inner}.to({_TL[dt]}, fp_downcast_rounding="rtz")'
        return f"{inner}.to({_TL[dt]})"


def draw_case(rng: random.Random) -> Case:
    """One case, every choice drawn from ``rng``."""
    b = _Builder(rng)
    op_class = rng.choice(OP_CLASSES)
    op = {"elementwise": _elementwise, "cast": _elementwise, "reduce": _reduce, "scan": _scan, "dot": _dot,
          "atomic": _atomic, "loop": _loop}[op_class](b, op_class)
    grid = b.constexprs.pop("_GRID")
    return Case(seed=None, op_class=op_class, op=op, source=b.source(), tensors=b.tensors,
                outputs=tuple(b.outputs), scalars=b.scalars, constexprs=b.constexprs, grid=(grid,),
                num_warps=rng.choice([1, 2, 4, 8, 16]), models=frozenset(b.models))


def _tile(b: _Builder, two_d: bool) -> tuple[tuple[int, ...], str, str]:
    """The program's tile: its shape, the offsets expression and the mask expression (``None``: unmasked).
    Rows (or elements) past the runtime bound ``n`` are masked; a 2-D tile masks columns past ``m`` too."""
    rng = b.rng
    grid = rng.choice([1, 1, 2, 3])
    b.constexprs["_GRID"] = grid
    if two_d:
        shape = (rng.choice([1, 2, 4, 8, 16]), rng.choice([1, 2, 4, 8, 16, 32]))
        b.constexprs.update(BM=shape[0], BN=shape[1])
        b.line("rm = tl.program_id(0) * BM + tl.arange(0, BM)")
        b.line("rn = tl.arange(0, BN)")
        b.line("offs = rm[:, None] * BN + rn[None, :]")
        masked = rng.random() < 0.5
        if masked:
            b.scalars["n"] = _bound(rng, grid * shape[0])
            b.scalars["m"] = _bound(rng, shape[1])
            b.line("mask = (rm[:, None] < n) & (rn[None, :] < m)")
        return shape, "offs", "mask" if masked else None
    shape = (rng.choice([1, 2, 4, 8, 16, 32, 64, 128]),)
    b.constexprs["BLOCK"] = shape[0]
    b.line("offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)")
    masked = rng.random() < 0.5
    if masked:
        b.scalars["n"] = _bound(rng, grid * shape[0])
        b.line("mask = offs < n")
    return shape, "offs", "mask" if masked else None


def _bound(rng: random.Random, size: int) -> int:
    """A runtime bound for a masked tile of ``size``: mostly inside it, at times 0 (all masked) or all of it."""
    return rng.choice([0, size, rng.randint(1, size), rng.randint(1, size)])


def _shape_text(shape: tuple[int, ...]) -> str:
    """The tile's shape in the kernel's constexprs (an expression over a scalar load alone is a scalar)."""
    return "(BM, BN)" if len(shape) == 2 else "(BLOCK,)"


def _load(b: _Builder, name: str, dt: str, shape: tuple[int, ...], offs: str, mask: str | None) -> None:
    grid = b.constexprs["_GRID"]
    full = (grid * shape[0],) + shape[1:]
    b.pointer(f"{name}_ptr", b.data(dt, full))
    if mask is None:
        b.line(f"{name} = tl.load({name}_ptr + {offs})")
    else:
        other = b.rng.choice(["0", "1", "-1"] if dt == "i32" else ["0.0", "1.0", "-float('inf')", "float('nan')"])
        b.line(f"{name} = tl.load({name}_ptr + {offs}, mask={mask}, other={other})")


def _store(b: _Builder, value: str, dt: str, shape: tuple[int, ...], offs: str, mask: str | None) -> None:
    grid = b.constexprs["_GRID"]
    full = (grid * shape[0],) + shape[1:]
    b.pointer("out_ptr", b.out_buffer(dt, full), output=True)
    b.line(f"tl.store(out_ptr + {offs}, {value}{'' if mask is None else f', mask={mask}'})")


def _inputs(b: _Builder, dts: list[str], shape: tuple[int, ...], offs: str, mask: str | None) -> dict[str, str]:
    """Block loads of ``dts``, and at times a scalar load (one element per program) beside them."""
    leaves = {}
    for k, dt in enumerate(dts):
        _load(b, "abc"[k], dt, shape, offs, mask)
        leaves["abc"[k]] = dt
    if b.rng.random() < 0.25:
        dt = b.rng.choice(dts)
        b.pointer("s_ptr", b.data(dt, (b.constexprs["_GRID"],)))
        b.line("s = tl.load(s_ptr + tl.program_id(0))")
        leaves["s"] = dt
    return leaves


def _elementwise(b: _Builder, op_class: str) -> str:
    rng = b.rng
    shape, offs, mask = _tile(b, rng.random() < 0.4)
    if op_class == "cast":
        in_dts = [rng.choice(["fp32", "fp16", "bf16", "i32"]) for _ in range(rng.randint(1, 2))]
        out = rng.choice([d for d in ("fp32", "fp16", "bf16", "i32") if d not in in_dts] or ["fp32"])
    else:
        out = rng.choice(["fp32", "fp32", "fp16", "bf16", "i32"])
        in_dts = [out] * rng.randint(1, 3)
    leaves = _inputs(b, in_dts, shape, offs, mask)
    value = b.expr(out, leaves, rng.randint(1, 3)) if op_class == "elementwise" else b.cast_to(out, leaves, 1)
    _store(b, value, out, shape, offs, mask)
    return op_class if op_class == "elementwise" else f"to_{out}"


def _reduced_shape(shape: tuple[int, ...], axis: int | None, keep: bool) -> tuple[int, ...]:
    if axis is None:
        return (1,) * len(shape) if keep else ()
    if keep:
        return tuple(1 if k == axis else s for k, s in enumerate(shape))
    return tuple(s for k, s in enumerate(shape) if k != axis)


def _store_shaped(b: _Builder, value: str, dt: str, shape: tuple[int, ...], name: str = "out_ptr") -> None:
    """Store a value of ``shape`` (any rank up to 2) for each program, densely, program after program."""
    grid = b.constexprs["_GRID"]
    size = 1
    for s in shape:
        size *= s
    b.pointer(name, b.out_buffer(dt, (grid * size,)), output=True)
    base = f"tl.program_id(0) * {size}"
    if not shape:
        b.line(f"tl.store({name} + {base}, {value})")
    elif len(shape) == 1:
        b.line(f"tl.store({name} + {base} + tl.arange(0, {shape[0]}), {value})")
    else:
        b.line(f"tl.store({name} + {base} + tl.arange(0, {shape[0]})[:, None] * {shape[1]} + "
               f"tl.arange(0, {shape[1]})[None, :], {value})")


def _reduce(b: _Builder, op_class: str) -> str:
    rng = b.rng
    shape, offs, mask = _tile(b, rng.random() < 0.5)
    op = rng.choice(_REDUCE_OPS)
    dt = "i32" if op == "xor_sum" else rng.choice(["fp32", "fp32", "fp16", "bf16", "bf16", "i32"])
    leaves = _inputs(b, [dt], shape, offs, mask)
    b.line(f"x = tl.broadcast_to({b.expr(dt, leaves, rng.randint(0, 1))}, {_shape_text(shape)})")
    axis = rng.choice([None] + list(range(len(shape))))
    keep = rng.random() < 0.5
    if op in ("argmax", "argmin", "max_idx", "min_idx") and axis is None:
        axis = 0  # indices need an axis (Triton asserts one)
    kw = f"axis={axis}, keep_dims={keep}"
    if dt != "i32":
        b.models.add("lowering")  # the compiled combine order (sums round per add; ties of a user combine)
    if dt != "i32" and op in ("max", "min", "argmax", "argmin", "max_idx", "min_idx"):
        b.models.add("nan_reduce")
    rshape = _reduced_shape(shape, axis, keep)
    if op in ("max_idx", "min_idx"):
        b.line(f"v, i = tl.{op[:3]}(x, {kw}, return_indices=True"
               f"{', return_indices_tie_break_left=False' if rng.random() < 0.3 else ''})")
        _store_shaped(b, "v", dt, rshape)
        _store_shaped(b, "i", "i32", rshape, "idx_ptr")
        return op
    if op == "reduce":
        name = rng.choice([k for k, (_, dts) in _COMBINES.items() if dt in dts])
        _combine(b, name, dt)
        if name == "absmax":
            b.models.add("lowering")  # |a| == |b| keeps the left operand: which one that is is the order's
        b.line(f"r = tl.reduce(x, {axis}, combine, keep_dims={keep})")
        _store_shaped(b, "r", dt, rshape)
        return f"reduce_{name}"
    if op in ("argmax", "argmin"):
        tie = ", tie_break_left=False" if rng.random() < 0.3 else ""
        b.line(f"r = tl.{op}(x, {kw}{tie})")
        _store_shaped(b, "r", "i32", rshape)
        return op
    b.line(f"r = tl.{op}(x, {kw})")
    # tl.sum of fp16/bf16 returns the input dtype; max/min too (Triton 3.6 and 3.9)
    _store_shaped(b, "r", dt, rshape)
    return op


def _combine(b: _Builder, name: str, dt: str) -> None:
    b.helpers.append(f"def combine(a, b):\n    {_COMBINES[name][0]}")
    if name in ("max", "min") and dt != "i32":
        b.models.add("nan_minmax")
    if name in ("add", "mul") and dt != "i32":
        b.models.add("canonical_nan")


def _scan(b: _Builder, op_class: str) -> str:
    rng = b.rng
    shape, offs, mask = _tile(b, rng.random() < 0.5)
    op = rng.choice(_SCAN_OPS)
    dt = rng.choice(["fp32", "fp32", "fp16", "bf16", "bf16", "i32"])
    leaves = _inputs(b, [dt], shape, offs, mask)
    b.line(f"x = tl.broadcast_to({b.expr(dt, leaves, rng.randint(0, 1))}, {_shape_text(shape)})")
    axis = rng.randrange(len(shape))
    reverse = rng.random() < 0.3
    if dt != "i32":
        b.models.add("lowering")
    if op == "associative_scan":
        name = rng.choice([k for k, (_, dts) in _COMBINES.items() if dt in dts])
        _combine(b, name, dt)
        if name == "absmax":
            b.models.add("lowering")
        b.line(f"r = tl.associative_scan(x, {axis}, combine, reverse={reverse})")
        op = f"scan_{name}"
    else:
        b.line(f"r = tl.{op}(x, axis={axis}, reverse={reverse})")
    _store_shaped(b, "r", _scan_dtype(op, dt), shape)
    return op


def _scan_dtype(op: str, dt: str) -> str:
    # tl.cumsum/cumprod keep the input dtype for floats; they widen int8/int16 only, and int32 stays
    return dt


def _dot(b: _Builder, op_class: str) -> str:
    rng = b.rng
    M, N, K = rng.choice([16, 32]), rng.choice([16, 32]), rng.choice([16, 32])
    dt = rng.choice(["fp16", "bf16", "fp32", "e4m3", "e5m2"])
    b.constexprs.update(_GRID=1, M=M, N=N, K=K)
    b.models.add("dot")
    src = dt if dt in _FLOATS else "fp32"
    a, bb = b.data(src, (M, K)), b.data(src, (K, N))
    if dt not in _FLOATS:
        b.models.add("fp8")
        a, bb = a.float().clamp(-240, 240).to(_TORCH[dt]), bb.float().clamp(-240, 240).to(_TORCH[dt])
    b.pointer("a_ptr", a)
    b.pointer("b_ptr", bb)
    b.line("rm = tl.arange(0, M)")
    b.line("rn = tl.arange(0, N)")
    b.line("rk = tl.arange(0, K)")
    b.line("a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])")
    b.line("b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])")
    prec = rng.choice(["", ", input_precision='ieee'", ", input_precision='tf32'"]) if dt == "fp32" else ""
    if rng.random() < 0.5:
        b.pointer("c_ptr", b.data("fp32", (M, N)))
        b.line("c = tl.load(c_ptr + rm[:, None] * N + rn[None, :])")
        b.line(f"r = tl.dot(a, b, c{prec})")
    else:
        b.line(f"r = tl.dot(a, b{prec})")
    out = rng.choice(["fp32", "fp32", "fp16", "bf16"])
    if out == "bf16":
        b.models.add("bf16")
    b.pointer("out_ptr", b.out_buffer(out, (M, N)), output=True)
    b.line(f"tl.store(out_ptr + rm[:, None] * N + rn[None, :], r.to({_TL[out]}))")
    return f"dot_{dt}"


def _atomic(b: _Builder, op_class: str) -> str:
    rng = b.rng
    shape, offs, mask = _tile(b, False)
    op = rng.choice(_ATOMIC_OPS)
    # what Triton compiles for sm90 (Triton 3.6 and 3.9): atomic max/min/xchg of fp16/bf16 are refused
    dt = rng.choice(["fp32", "i32"] + (["fp16", "bf16"] if op in ("add", "cas") else []))
    _load(b, "v", dt, shape, offs, mask)
    if op == "add" and dt in ("fp16", "bf16"):
        b.models.add("atomic_f16")
    slots = rng.choice([1, 2, 3, shape[0]])
    b.constexprs["SLOTS"] = slots
    b.pointer("acc_ptr", b.data(dt, (slots,)) if rng.random() < 0.5 else b.out_buffer(dt, (slots,)), output=True)
    grid = b.constexprs["_GRID"]
    b.pointer("old_ptr", b.out_buffer(dt, (grid * shape[0],)), output=True)
    m = "" if mask is None else f", mask={mask}"
    if op == "cas":  # against the slot's value before: the first element of a slot swaps, the rest compare
        b.line("old = tl.atomic_cas(acc_ptr + offs % SLOTS, tl.load(acc_ptr + offs % SLOTS), v)")
    else:
        b.line(f"old = tl.atomic_{op}(acc_ptr + offs % SLOTS, v{m})")
    b.line(f"tl.store(old_ptr + offs, old{m})")
    return f"atomic_{op}_{dt}"


def _loop(b: _Builder, op_class: str) -> str:
    rng = b.rng
    shape = (rng.choice([1, 4, 16, 32]),)
    iters = rng.randint(0, 4)
    b.constexprs.update(_GRID=1, BLOCK=shape[0])
    dt = rng.choice(["fp32", "fp16", "bf16", "i32"])
    acc = rng.choice(["fp32", dt])
    b.scalars["iters"] = iters
    b.pointer("x_ptr", b.data(dt, (max(iters, 1) * shape[0],)))
    b.line("offs = tl.arange(0, BLOCK)")
    b.line(f"acc = tl.zeros([BLOCK], dtype={_TL[acc]})")
    loop = rng.choice(["range", "tl.range"])
    b.line(f"for i in {loop}(0, iters):")
    b.line("    x = tl.load(x_ptr + i * BLOCK + offs)")
    step = b.expr(acc, {"x": dt, "acc": acc} if acc == dt else {"acc": acc, "xc": acc}, 1)
    if acc != dt:
        b.line(f"    xc = x.to({_TL[acc]})")
        if "bf16" in (acc, dt):
            b.models.add("bf16")
    b.line(f"    acc = acc + {step}")
    if acc != "i32":
        b.models.add("canonical_nan")
    b.pointer("out_ptr", b.out_buffer(acc, shape), output=True)
    b.line("tl.store(out_ptr + offs, acc)")
    return f"loop_{acc}"
