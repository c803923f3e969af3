"""The lowering models pinned against Triton's own compiler output (sm90 PTX of small kernels, compiled here on
the CPU) and their numpy evaluators on inputs where the order decides the result."""

from __future__ import annotations

import re

import numpy as np
import pytest

from harness.lowering import fma as fma_mod
from harness.lowering import layout, numeric, reduce_order, scan_order, sites, ttgir
from harness.lowering.compiled import facts_from_asm
from harness.lowering.layout import AxisBits

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")
tl = pytest.importorskip("triton.language")

pytestmark = pytest.mark.lane_independent  # compiles and evaluates on the CPU: the GPU lane adds nothing


def _version() -> str:
    return ".".join(triton.__version__.split(".")[:2])


@pytest.fixture(scope="module")
def compile_sm90():
    from harness.compile.matrix import compile_matrix

    def run(fn, sig, consts, warps, divisible=()):
        res = compile_matrix(fn, signature=sig, constexprs=consts, targets=["sm90"], options={"num_warps": warps},
                             divisible=divisible)
        got = res["sm90"]
        if isinstance(got, BaseException):
            raise got
        return got.asm
    return run


def _kernels():
    from tests.lowering import kernels
    return kernels


def _source(module) -> list[str]:  # noqa: ANN001
    from pathlib import Path

    return Path(module.__file__).read_text().splitlines()


def _first_reduce_ptx(ptx: str) -> tuple[list[int], int]:
    """xor offsets of the first reduction's butterflies (in order), and the adds before its first shuffle."""
    lines = ptx.splitlines()
    first = next(i for i, ln in enumerate(lines) if "shfl.sync.bfly" in ln)
    adds = sum(1 for ln in lines[:first] if re.match(r"\s*(add|max|min)\.(f32|bf16|f16)\b", ln))
    end = next((i for i, ln in enumerate(lines) if "bar.sync" in ln and i > first), len(lines))
    bfly = re.compile(r"shfl\.sync\.bfly\.b32\s+%r\d+, %r\d+, (\d+),")
    offs = [int(m.group(1)) for ln in lines[first:end + 40] for m in [bfly.search(ln)] if m]
    return offs, adds


_ALIGNED = ("x_ptr", "v_ptr", "i_ptr")  # what Triton's JIT specializes for 16-byte aligned tensors


@pytest.mark.parametrize("divisible", [(), _ALIGNED], ids=["unaligned", "aligned"])
@pytest.mark.parametrize(("warps", "n"), [(4, 1024), (8, 4096), (1, 256)])
def test_reduce_plan_matches_ptx(compile_sm90, warps, n, divisible):
    """The plan's shuffle offsets and in-thread combines are what Triton emits for tl.max of an fp32 row."""
    k = _kernels()
    asm = compile_sm90(k.row_max_argmax, {"x_ptr": "*fp32", "v_ptr": "*fp32", "i_ptr": "*i32"}, {"N": n}, warps,
                       divisible)
    mod = ttgir.parse(asm["ttgir"])
    op = mod.ops[0]
    bits = layout.axis_bits(op.operands[0].layout, op.operands[0].shape, op.axis, mod.layouts)
    plan = reduce_order.ReducePlan(bits, reduce_order.rule_for(triton.__version__))
    intra, inter = plan.shuffle_offsets()
    offs, adds = _first_reduce_ptx(asm["ptx"])
    assert offs[:len(intra) + len(inter)] == list(intra + inter)
    assert adds == plan.thread_combines()


@pytest.mark.parametrize("divisible", [(), _ALIGNED], ids=["unaligned", "aligned"])
def test_in_thread_shape_matches_ptx(compile_sm90, divisible):
    """Triton 3.6 folds a thread's registers left to right (each add reads the previous sum); 3.9 adds them as a
    pairwise tree (the first half of the adds read only loaded values)."""
    k = _kernels()
    asm = compile_sm90(k.row_max_argmax, {"x_ptr": "*fp32", "v_ptr": "*fp32", "i_ptr": "*i32"}, {"N": 1024}, 4,
                       divisible)
    ptx = asm["ptx"]
    head = ptx[:ptx.index("shfl.sync.bfly")]
    ops = re.findall(r"max\.f32\s+(%r\d+), (%r\d+), (%r\d+);", head)
    assert len(ops) == 7
    dests = [d for d, _, _ in ops]
    chained = all(ops[i][1] == dests[i - 1] or ops[i][2] == dests[i - 1] for i in range(1, 7))
    leaves_first = all(a not in dests and b not in dests for _, a, b in ops[:4])
    rule = reduce_order.rule_for(triton.__version__)
    assert (rule.thread == "sequential") == chained
    assert (rule.thread == "tree") == leaves_first


def test_bf16_16_wide_sum_layout(compile_sm90):
    """A (64, 16) bf16 block summed along axis 1 on 4 warps: 16 lanes along the row, xor 8, 4, 2, 1, bf16 adds."""
    k = _kernels()
    asm = compile_sm90(k.row_sum, {"x_ptr": "*bf16", "y_ptr": "*bf16", "M": "i32"}, {"N": 16, "BLOCK_M": 64}, 4)
    facts = facts_from_asm(asm, _version(), "sm90", 4, source=_kernels().__file__)
    (red,) = facts.reductions
    assert (red.kind, red.axis, red.elem) == ("add", 1, "bf16")
    assert red.bits == AxisBits(16, (), ((0, 1), (1, 2), (2, 4), (3, 8)), (), first_register_on_axis=False)
    offs, _ = _first_reduce_ptx(asm["ptx"])
    assert offs[:4] == [8, 4, 2, 1]
    assert "add.bf16" in asm["ptx"] or "add.rn.bf16" in asm["ptx"]


@triton.jit
def _nested_sums(x_ptr, y_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    a = tl.arange(0, A)[:, None, None]
    b = tl.arange(0, B)[None, :, None]
    c = tl.arange(0, C)[None, None, :]
    x = tl.load(x_ptr + (a * B + b) * C + c)
    tl.store(y_ptr, tl.sum(tl.sum(tl.sum(x, axis=2), axis=1), axis=0))


def test_a_reduction_of_a_reduction_reads_its_nested_slice_layout(compile_sm90):
    """A sum over a sum's result has a ``#ttg.slice`` of a ``#ttg.slice`` operand (``tensor<4x8xf32,
    #ttg.slice<{dim = 1, parent = #ttg.slice<{dim = 2, parent = #blocked}>}>>``): every reduction is read, each
    with the bits of its axis, so none falls back to the interpreter's order (kernels/mx/quantize.py's block
    amax is three such nested reductions)."""
    asm = compile_sm90(_nested_sums, {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"A": 4, "B": 8, "C": 16}, 4)
    assert re.search(r"parent = #ttg\.slice<", asm["ttgir"]), "the kernel no longer makes a nested slice"
    facts = facts_from_asm(asm, _version(), "sm90", 4, source=__file__)
    got = [(r.kind, r.axis, r.elem, r.error, None if r.bits is None else r.bits.size) for r in facts.reductions]
    assert got == [("add", 2, "f32", "", 16), ("add", 1, "f32", "", 8), ("add", 0, "f32", "", 4)]


def test_tensor_types_with_nested_layouts_are_read_whole():
    nested = "#ttg.slice<{dim = 0, parent = #ttg.slice<{dim = 3, parent = #ttg.slice<{dim = 4, parent = #b2}>}>}>"
    text = f"(tensor<16x16xi32, {nested}>, tensor<8x!tt.ptr<f32>, #b2>, tensor<2x4xf16, #b1>) -> tensor<16xi32, #b1>"
    assert ttgir._tensors(text) == (ttgir.TensorType((16, 16), "i32", nested), ttgir.TensorType((2, 4), "f16", "#b1"),
                                    ttgir.TensorType((16,), "i32", "#b1"))


@pytest.mark.parametrize("divisible", [(), ("x_ptr", "y_ptr")], ids=["unaligned", "aligned"])
@pytest.mark.parametrize(("warps", "n"), [(4, 1024), (1, 128), (8, 4096)])
def test_scan_plan_matches_ptx(compile_sm90, warps, n, divisible):
    """Aligned rows load 4 fp32 per thread (chunks of S = 4), unaligned ones 1: the plan's shfl.sync.up offsets
    and combine count are the PTX's in both."""
    k = _kernels()
    asm = compile_sm90(k.row_cumsum, {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"N": n}, warps, divisible)
    mod = ttgir.parse(asm["ttgir"])
    (op,) = mod.ops
    p = scan_order.plan(layout.axis_bits(op.operands[0].layout, op.operands[0].shape, op.axis, mod.layouts))
    ptx = asm["ptx"]
    ups = [int(m) for m in re.findall(r"shfl\.sync\.up\.b32\s+%r\d+, %r\d+, (\d+), 0, -1;", ptx)]
    assert ups[:len(p.shuffle_up_offsets())] == list(p.shuffle_up_offsets())
    assert len(re.findall(r"^\s*add\.f32\b", ptx, re.M)) == p.combines()


def test_fused_sites_layernorm(compile_sm90):
    """LLVM fuses `(x - mean) * rstd * w + b` and, inside tl.sum(d * d), the in-thread adds of products: the
    derived rule's count equals the PTX's fma.rn.f32 (fused_sites raises otherwise), at the same source nodes on
    Triton 3.6 and 3.9."""
    k = _kernels()
    sig = {"x_ptr": "*fp32", "w_ptr": "*fp32", "b_ptr": "*fp32", "y_ptr": "*fp32", "N": "i32", "eps": "fp32"}
    asm = compile_sm90(k.layernorm, sig, {"BLOCK_N": 1024}, 4)
    facts = facts_from_asm(asm, _version(), "sm90", 4, source=_kernels().__file__)
    src = _source(k)
    var_line = next(i + 1 for i, ln in enumerate(src) if "var = tl.sum(d * d" in ln)
    y_line = next(i + 1 for i, ln in enumerate(src) if "y = (x - mean) * rstd * w + b" in ln)
    got = {(f.mul[1:], f.add[1:]) for f in facts.fused}
    d_col = src[var_line - 1].index("d * d")
    sum_col = src[var_line - 1].index("tl.sum")
    y_col = src[y_line - 1].index("(x - mean)")
    assert got == {((var_line, d_col), (var_line, sum_col)), ((y_line, y_col), (y_line, y_col))}
    per_thread = {f.add[1:]: f.count for f in facts.fused}
    assert per_thread[(var_line, sum_col)] == reduce_order.rule_for(triton.__version__).thread_fma(8)


def test_affine_fused_and_acc_loop(compile_sm90):
    k = _kernels()
    asm = compile_sm90(k.affine, {"x_ptr": "*fp32", "y_ptr": "*fp32", "s": "fp32", "b": "fp32", "N": "i32"},
                       {"BLOCK": 1024}, 4)
    sites_ = fma_mod.fused_sites(asm["llir"], asm["ptx"])
    assert sum(s.count for s in sites_) == fma_mod.ptx_fma_count(asm["ptx"]) == 8
    asm = compile_sm90(k.acc_loop, {"a_ptr": "*fp32", "b_ptr": "*fp32", "y_ptr": "*fp32", "K": "i32", "N": "i32"},
                       {"BLOCK": 512}, 4)
    facts = facts_from_asm(asm, _version(), "sm90", 4, source=_kernels().__file__)
    src = _source(k)
    line = next(i + 1 for i, ln in enumerate(src) if ln.strip() == "acc += a * b")
    col = src[line - 1].index("acc")
    assert {(f.mul[1:], f.add[1:]) for f in facts.fused} == {((line, col + 7), (line, col))}



def _ptx_thread_chain(ptx: str) -> str:
    """The in-thread part of the first reduction as the PTX has it: its fma (``F``) and add (``a``) in program
    order, up to the first warp shuffle."""
    head = ptx[:ptx.index("shfl.sync.bfly")]
    ops = re.findall(r"^\s*(fma\.rn|add)\.(?:rn\.)?(?:f32x2|f32|f16x2|bf16x2|f16|bf16)\s", head, re.M)
    return "".join("F" if op == "fma.rn" else "a" for op in ops)


_SOS = ("x_ptr", "y_ptr")
_RMS = ("x_ptr", "w_ptr", "y_ptr")


@pytest.mark.parametrize(("kernel", "dt", "consts", "warps", "divisible", "arch"), [
    ("sum_of_squares", "fp32", {"N": 1024}, 4, _SOS, "sm90"),
    ("sum_of_squares", "fp16", {"N": 1024}, 4, _SOS, "sm90"),
    ("sum_of_squares", "bf16", {"N": 1024}, 4, _SOS, "sm90"),
    ("sum_of_squares", "fp16", {"N": 4096}, 8, _SOS, "sm90"),
    ("rms_scale", "fp16", {"BLOCK": 8192}, 16, _RMS, "sm90"),
    ("rms_scale", "bf16", {"BLOCK": 8192}, 16, _RMS, "sm90"),
    ("rms_scale", "fp32", {"BLOCK": 8192}, 16, _RMS, "sm90"),
    ("rms_scale", "fp32", {"BLOCK": 8192}, 16, _RMS, "sm100"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_thread_fma_is_the_ptx_chain(kernel, dt, consts, warps, divisible, arch):
    """Which in-thread adds of tl.sum(x * x) the facts say are contracted (read from the LLIR) is the PTX's chain
    of fma and add, one per register after the first: 16-bit products reaching an add through a lane shuffle
    stay unfused (``fma fma add fma add ...`` for registers loaded in pairs; ``fma`` x 7 then ``add`` x 8 where
    LLVM packs registers k and k + 8 for the elementwise code after the sum); fp32 ones are split to scalars on
    sm90 and all fuse, on sm100 (f32x2) every other one. Triton 3.6's sequential fold only."""
    if reduce_order.rule_for(triton.__version__).thread != "sequential":
        pytest.skip(f"Triton {triton.__version__} adds a thread's registers as a tree (thread_fma is 3.6's)")
    k = _kernels()
    sig = {"x_ptr": f"*{dt}", "y_ptr": f"*{dt}"}
    if kernel == "rms_scale":
        sig = {"x_ptr": f"*{dt}", "w_ptr": f"*{dt}", "y_ptr": f"*{dt}", "n": "i32", "eps": "fp32", "b": "fp32"}
    from harness.compile.matrix import compile_matrix

    got = compile_matrix(getattr(k, kernel), signature=sig, constexprs=consts, targets=[arch],
                         options={"num_warps": warps}, divisible=divisible)[arch]
    if isinstance(got, BaseException):
        raise got
    asm = got.asm
    facts = facts_from_asm(asm, _version(), arch, warps, source=k.__file__)
    (red,) = facts.reductions
    chain = _ptx_thread_chain(asm["ptx"])
    assert len(chain) == (1 << len(red.bits.registers)) - 1
    assert red.thread_fma is not None
    assert "".join("F" if f else "a" for f in red.thread_fma) == chain
    assert ("a" in chain) == (dt != "fp32" or arch != "sm90"), "which sums keep some adds apart"


# --- evaluators, on values where the order decides ---------------------------------------------------------

_ONE_THREAD = AxisBits(8, (1, 2, 4), (), ())
_FOUR_LANES = AxisBits(4, (), ((0, 1), (1, 2)), ())
_BIG = np.float32(2.0 ** 24)


def test_sequential_and_tree_sums_differ():
    # 2^24 + 1 rounds to 2^24 (tie to even): left to right loses every 1, the tree adds 1 + 1 first.
    x = np.array([[_BIG, 1, 1, 1, -_BIG, 0, 0, 0]], dtype=np.float32)
    (seq,) = reduce_order.reduce(x, 1, reduce_order.ReducePlan(_ONE_THREAD, reduce_order.RULES["3.6"]), "add", "fp32")
    (tree,) = reduce_order.reduce(x, 1, reduce_order.ReducePlan(_ONE_THREAD, reduce_order.RULES["3.9"]), "add", "fp32")
    assert seq.tolist() == [0.0]
    assert tree.tolist() == [2.0]


def test_butterfly_pairs_highest_lane_bit_first():
    # xor 2 first: (2^24 + 1) -> 2^24 and (-2^24 + 1) exact, then their sum 1; lowest bit first would give 2.
    x = np.array([_BIG, -_BIG, 1, 1], dtype=np.float32)
    (s,) = reduce_order.reduce(x, 0, reduce_order.ReducePlan(_FOUR_LANES, reduce_order.RULES["3.9"]), "add", "fp32")
    assert float(s) == 1.0


def test_argmax_nan_follows_operand_order():
    # Triton's argmax combine: a NaN loses as the left operand and wins as the right one.
    v = np.array([3, 1, np.nan, 0, 0, 0, 0, 0], dtype=np.float32)[None, :4]
    idx = np.arange(4, dtype=np.int32)[None]
    bits = AxisBits(4, (1, 2), (), ())
    seq = reduce_order.reduce((v, idx), 1, reduce_order.ReducePlan(bits, reduce_order.RULES["3.6"]), "argmax", "fp32")
    tree = reduce_order.reduce((v, idx), 1, reduce_order.ReducePlan(bits, reduce_order.RULES["3.9"]), "argmax", "fp32")
    assert (float(seq[0][0]), int(seq[1][0])) == (0.0, 3)
    assert (float(tree[0][0]), int(tree[1][0])) == (3.0, 0)
    ties = reduce_order.reduce((np.array([5, 5], np.float32), np.array([0, 1], np.int32)), 0,
                               reduce_order.ReducePlan(AxisBits(2, (), ((0, 1),), ()), reduce_order.RULES["3.9"]),
                               "argmax", "fp32")
    assert int(ties[1]) == 0


def test_sum_of_products_fuses_in_thread():
    # fma(a, a, b*b): one rounding of 2^24 + 1 + 2^-?: with a = 2^12 + 1, a*a = 2^24 + 2^13 + 1 (25 bits).
    a = np.float32(4097.0)
    prods = np.array([numeric.mul(a, a, "fp32"), np.float32(0.0)], dtype=np.float32)
    bits = AxisBits(2, (1,), (), ())
    plan = reduce_order.ReducePlan(bits, reduce_order.RULES["3.9"])
    (plain,) = reduce_order.reduce(prods, 0, plan, "add", "fp32")
    (fused,) = reduce_order.reduce(prods, 0, plan, "add", "fp32",
                                   factors=(np.array([a, 0], np.float32), np.array([a, 0], np.float32)))
    assert float(plain) == 16785408.0  # 2^24 + 2^13: the product rounded
    assert float(fused) == 16785408.0  # + 0: the same; now a case where the addend matters
    c = np.float32(-16785408.0)
    (fused2,) = reduce_order.reduce(np.array([numeric.mul(a, a, "fp32"), c], np.float32), 0, plan, "add", "fp32",
                                    factors=(np.array([a, 1], np.float32), np.array([a, c], np.float32)))
    assert float(fused2) == 1.0  # exact a*a - (2^24 + 2^13): the product's lost 1 comes back


def test_fma_one_rounding():
    a = np.float32(1 + 2.0 ** -12)
    assert float(numeric.fma(a, a, np.float32(-1), "fp32")) == 2.0 ** -11 + 2.0 ** -24
    assert float(numeric.add(numeric.mul(a, a, "fp32"), np.float32(-1), "fp32")) == 2.0 ** -11
    b = numeric.from_f32(np.float32(1 + 2.0 ** -5), "bf16")
    one = numeric.from_f32(np.float32(-1), "bf16")
    assert float(numeric.to_f32(numeric.fma(b, b, one, "bf16"), "bf16")) == 2.0 ** -4 + 2.0 ** -10
    h = np.float16(1 + 2.0 ** -6)
    assert float(numeric.fma(h, h, np.float16(-1), "fp16")) == 2.0 ** -5 + 2.0 ** -12


def test_scan_order_on_exact_and_inexact_values():
    rng = np.random.default_rng(1)
    for S, L, W, B in [(1, 32, 4, 8), (4, 8, 1, 1), (2, 32, 1, 4), (4, 32, 2, 2)]:
        n = S * L * W * B
        xi = rng.integers(-8, 8, (3, n)).astype(np.float32)
        assert (scan_order.scan(xi, 1, scan_order.ScanPlan(S, L, W, B), "add", "fp32") == np.cumsum(xi, 1)).all()
    # one warp of 4 lanes, 1 element each: Hillis-Steele gives lane 2 = x0 + (x1 + x2) and lane 3 =
    # (x0 + x1) + (x2 + x3); a left fold would lose every 1 against 2^24
    x = np.array([_BIG, 1, 1, 0], dtype=np.float32)
    y = scan_order.scan(x, 0, scan_order.ScanPlan(1, 4, 1, 1), "add", "fp32")
    assert y.tolist() == [_BIG, _BIG, _BIG + 2, _BIG]


def test_node_key_rules(tmp_path):
    src = "def k(x, s, b):\n    y = x * s + b\n    return tl.sum(x, axis=0)\n    z = x.sum(axis=0) + tl.max(x, 0)\n"
    p = tmp_path / "k.py"
    p.write_text(src)
    # 3.9: node start, absolute column + 1; 3.6: the right operand / last argument, column of the dedented source
    # (a def at column 0 dedents nothing)
    assert sites.node_key(str(p), 2, 9, "add", "3.9.0") == (2, 8)
    assert sites.node_key(str(p), 2, 16, "add", "3.6.0") == (2, 8)
    assert sites.node_key(str(p), 2, 12, "mul", "3.6.0") == (2, 8)
    assert sites.node_key(str(p), 3, 18, "call", "3.6.0") == (3, 11)
    assert sites.node_key(str(p), 4, 14, "call", "3.6.0") == (4, 8)  # no positional argument: the keyword
    assert sites.node_key(str(p), 4, 34, "call", "3.6.0") == (4, 24)  # the last positional argument


def test_ptxas_contraction_is_detected(compile_sm90):
    """ptxas contracts beyond LLVM (sm90, Triton 3.6 and 3.9): across a loop's back edge, and the multiply that
    ends div.full.f32 into `x - tl.sum(x) / N`. Both are reported; a kernel with neither reports none."""
    k = _kernels()
    src = _source(k)
    asm = compile_sm90(k.scaled_loop, {"x_ptr": "*fp32", "y_ptr": "*fp32", "s": "fp32", "K": "i32"}, {"BLOCK": 128}, 4)
    if fma_mod.nvdisasm() is None:
        pytest.skip("this Triton ships no nvdisasm")
    lines = {ln for _, ln in fma_mod.ptxas_contracted_lines(asm["cubin"], asm["ptx"])}
    add_line = next(i + 1 for i, ln in enumerate(src) if ln.strip() == "acc = acc + p")
    assert lines == {add_line}
    (pair,) = fma_mod.carried_pairs(asm["llir"])
    assert (pair.add[1], pair.mul[1], pair.op) == (add_line, add_line + 1, "fadd")
    assert fma_mod.ptxas_unrolled(asm["cubin"], pair.add[:2], pair.mul[:2]) == (4, 2, 1)
    assert fma_mod.ptxas_unrolled(asm["cubin"], pair.add[:2], (pair.mul[0], add_line + 2)) is None  # no such pair
    facts = facts_from_asm(asm, _version(), "sm90", 4, source=k.__file__)
    assert [(c.add[1], c.mul[1], c.unroll) for c in facts.carried] == [(add_line, add_line + 1, (4, 2, 1))]
    assert facts.unmodelled_ptxas_lines() == ()
    sig = {"x_ptr": "*fp32", "w_ptr": "*fp32", "b_ptr": "*fp32", "y_ptr": "*fp32", "N": "i32", "eps": "fp32"}
    asm = compile_sm90(k.layernorm, sig, {"BLOCK_N": 1024}, 4)
    lines = {ln for _, ln in fma_mod.ptxas_contracted_lines(asm["cubin"], asm["ptx"])}
    assert lines == {next(i + 1 for i, ln in enumerate(src) if "d = tl.where(m, x - mean, 0.0)" in ln)}
    asm = compile_sm90(k.affine, {"x_ptr": "*fp32", "y_ptr": "*fp32", "s": "fp32", "b": "fp32", "N": "i32"},
                       {"BLOCK": 1024}, 4)
    assert fma_mod.ptxas_contracted_lines(asm["cubin"], asm["ptx"]) == set()


def test_16bit_in_thread_packing_matches_ptx(compile_sm90):
    """A (64, 64) bf16 block summed along axis 0 on 4 warps holds 32 rows per thread: Triton 3.9 adds them as
    bf16x2 pairs along the axis (15 packed tree adds and the packed final pair add before the shared-memory
    step), Triton 3.6 as 31 scalar bf16 adds."""
    k = _kernels()
    asm = compile_sm90(k.col_sum, {"x_ptr": "*bf16", "y_ptr": "*bf16", "N": "i32"}, {"M": 64, "BLOCK_N": 64}, 4)
    facts = facts_from_asm(asm, _version(), "sm90", 4, source=_kernels().__file__)
    (red,) = facts.reductions
    plan = reduce_order.ReducePlan(red.bits, reduce_order.rule_for(triton.__version__))
    assert plan.thread_combines() == 31
    ptx = asm["ptx"]
    head = ptx[:ptx.index("bar.sync")]
    packed = len(re.findall(r"^\s*add(\.rn)?\.bf16x2\b", head, re.M))
    scalar = len(re.findall(r"^\s*add(\.rn)?\.bf16\b", head, re.M))
    if plan.packed("bf16", "add"):
        assert (packed, scalar) == (16, 0)
    else:
        assert (packed, scalar) == (0, 31)


def test_packed_bf16_tree_combines_halves_last():
    # registers (256, -256, 1, 1) in bf16 (8 significant bits): pairs along the axis give (256 + 1) + (-256 + 1)
    # = 256 - 255 = 1 (257 rounds to 256); unpacked, the tree gives (256 - 256) + (1 + 1) = 2, the left fold 2
    x = numeric.from_f32(np.array([256, -256, 1, 1], dtype=np.float32), "bf16")
    along = AxisBits(4, (1, 2), (), ())
    across = AxisBits(4, (1, 2), (), (), first_register_on_axis=False)
    rule39, rule36 = reduce_order.RULES["3.9"], reduce_order.RULES["3.6"]
    got = {name: float(numeric.to_f32(reduce_order.reduce(x, 0, reduce_order.ReducePlan(b, r), "add", "bf16")[0],
                                      "bf16"))
           for name, b, r in (("packed", along, rule39), ("tree", across, rule39), ("fold", along, rule36))}
    assert got == {"packed": 1.0, "tree": 2.0, "fold": 2.0}


def test_lowering_for_caches_on_disk_and_follows_fp_fusion(tmp_path, monkeypatch):
    """A warm rerun (a new process: the in-memory table emptied) reads the facts back and compiles nothing; a
    launch with enable_fp_fusion=False has no fused pairs; a kernel that does not compile reports why, and one whose
    compiled code gives no facts says it compiled."""
    from harness.compile import cache
    from harness.lowering import compiled

    k = _kernels()
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "s": "fp32", "b": "fp32", "N": "i32"}
    monkeypatch.setattr(compiled, "_MEMO", {})
    first = compiled.lowering_for(k.affine, sig, {"BLOCK": 256}, num_warps=2, fp_fusion=True, directory=tmp_path)
    assert first.error == "" and sum(f.count for f in first.fused) == 4
    monkeypatch.setattr(compiled, "_MEMO", {})
    before = cache.stats()["compiles"]
    again = compiled.lowering_for(k.affine, sig, {"BLOCK": 256}, num_warps=2, fp_fusion=True, directory=tmp_path)
    assert cache.stats()["compiles"] == before
    assert again == first
    off = compiled.lowering_for(k.affine, sig, {"BLOCK": 256}, num_warps=2, fp_fusion=False, directory=tmp_path)
    assert off.error == "" and off.fused == ()
    bad = compiled.lowering_for(k.affine, {**sig, "x_ptr": "*fp8e4nv"}, {"BLOCK": 256}, num_warps=2,
                                arch="sm80", directory=tmp_path)
    assert bad.error.startswith("does not compile (") and bad.fused == () and bad.reductions == ()

    def unreadable(*args, **kwargs):
        raise ValueError("the LLIR rule predicts 14 fma, the PTX has 15")

    monkeypatch.setattr(compiled, "facts_from_asm", unreadable)
    odd = compiled.lowering_for(k.affine, sig, {"BLOCK": 512}, num_warps=2, directory=tmp_path)
    assert odd.error == ("compiles, but its code does not give the facts (ValueError: the LLIR rule predicts 14 fma, "
                         "the PTX has 15)")
    with pytest.raises(ValueError, match="num_warps must be a power of two"):
        compiled.lowering_for(k.affine, sig, {"BLOCK": 256}, num_warps=3, directory=tmp_path)


def test_specialize_follows_triton_jit_and_changes_the_layout(tmp_path, monkeypatch):
    """An aligned fp32 row compiles with sizePerThread 4 (vectorized loads), a misaligned view with 1: the
    facts differ, so lowering_for must be given the launch's specialization."""
    from harness.lowering import compiled

    k = _kernels()
    monkeypatch.setattr(compiled, "_MEMO", {})
    x = torch.zeros(2 * 1024 + 4)
    v, i = torch.zeros(2), torch.zeros(2, dtype=torch.int32)
    aligned = compiled.specialize(k.row_max_argmax, (x, v, i), {"N": 1024, "num_warps": 4})
    shifted = compiled.specialize(k.row_max_argmax, (x[1:], v, i), {"N": 1024, "num_warps": 4})
    assert aligned.divisible == {"x_ptr", "v_ptr", "i_ptr"} and shifted.divisible == {"v_ptr", "i_ptr"}
    acc = compiled.specialize(k.acc_loop, (x, x, x, 1, 32), {"BLOCK": 32, "num_warps": 1})
    assert acc.constexprs["K"] == 1 and "K" not in acc.signature and "N" in acc.divisible and acc.num_warps == 1
    facts = {name: compiled.lowering_for(k.row_max_argmax, s.signature, s.constexprs, num_warps=4,
                                         divisible=s.divisible, directory=tmp_path).reductions[0].bits
             for name, s in (("aligned", aligned), ("shifted", shifted))}
    assert facts["aligned"].registers == (1, 2, 512)
    assert facts["shifted"].registers == (128, 256, 512)



@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_aligned_16bit_row_sum_in_thread_adds(compile_sm90, dtype):
    """An aligned 16-bit row loads 8 per thread along the axis: Triton 3.9 adds them as 3 packed tree adds and the
    final pair add (4), Triton 3.6 as a left fold of 7 (LLVM emits each as a x2 op, one half used)."""
    k = _kernels()
    asm = compile_sm90(k.row_sum, {"x_ptr": f"*{dtype}", "y_ptr": f"*{dtype}", "M": "i32"},
                       {"N": 1024, "BLOCK_M": 1}, 4, ("x_ptr", "y_ptr"))
    (red,) = facts_from_asm(asm, _version(), "sm90", 4, source=_kernels().__file__).reductions
    plan = reduce_order.ReducePlan(red.bits, reduce_order.rule_for(triton.__version__))
    ptx = asm["ptx"]
    head = ptx[:ptx.index("shfl.sync.bfly")]
    adds = len(re.findall(r"^\s*add(\.rn)?\.(bf16|f16)(x2)?\b", head, re.M))
    assert red.bits.registers == (1, 2, 4)
    assert adds == (4 if plan.packed(dtype, "add") else 7)


@pytest.mark.parametrize("divisible", [(), ("x_ptr", "y_ptr")], ids=["unaligned", "aligned"])
def test_sum_of_products_fuses_as_the_rule_says(compile_sm90, divisible):
    """tl.sum(x * x) of an fp32 row, 8 elements per thread: the PTX has thread_fma(8) fma.rn.f32 (3.9's tree
    folds the left product of each first-level pair: 4; 3.6's left fold every step: 7), at the reduction's
    site from the multiply's."""
    k = _kernels()
    asm = compile_sm90(k.sum_of_squares, {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"N": 1024}, 4, divisible)
    facts = facts_from_asm(asm, _version(), "sm90", 4, source=_kernels().__file__)
    (red,) = facts.reductions
    assert len(red.bits.registers) == 3
    assert fma_mod.ptx_fma_count(asm["ptx"]) == reduce_order.rule_for(triton.__version__).thread_fma(8)
    assert {(f.mul, f.add) for f in facts.fused} == {(f.mul, red.where) for f in facts.fused}
    assert facts.fused


def test_fused_steps_fuse_only_the_adds_named():
    """A sequential fold with ``fused_steps``: step r is fma(x_r, x_r, acc) where flagged, acc + round(x_r²)
    elsewhere; the first step folds register 0's product into register 1's."""
    bits = AxisBits(4, (1, 2), (), ())
    plan = reduce_order.ReducePlan(bits, reduce_order.RULES["3.6"])
    x = np.random.default_rng(38).standard_normal((512, 4)).astype(np.float16)
    sq = numeric.mul(x, x, "fp16")
    steps = (True, False, True)
    (got,) = reduce_order.reduce(sq, 1, plan, "add", "fp16", factors=(x, x), fused_steps=steps)
    want = numeric.fma(x[:, 0], x[:, 0], sq[:, 1], "fp16")
    want = numeric.add(want, sq[:, 2], "fp16")
    want = numeric.fma(x[:, 3], x[:, 3], want, "fp16")
    np.testing.assert_array_equal(got, want)
    (all_fused,) = reduce_order.reduce(sq, 1, plan, "add", "fp16", factors=(x, x))
    assert (got != all_fused).any()
    with pytest.raises(ValueError, match="fused_steps= has 2 flags, the thread adds 3 times"):
        reduce_order.reduce(sq, 1, plan, "add", "fp16", factors=(x, x), fused_steps=(True, False))
    with pytest.raises(ValueError, match="fused_steps= is for a sequential in-thread sum of products"):
        reduce_order.reduce(sq, 1, reduce_order.ReducePlan(bits, reduce_order.RULES["3.9"]), "add", "fp16",
                            factors=(x, x), fused_steps=steps)


@pytest.mark.parametrize(("n", "places"), [(1, [0]), (3, [0, 1, 0]), (4, [0, 1, 2, 3]), (6, [0, 1, 2, 3, 0, 1]),
                                           (7, [0, 1, 2, 3, 0, 1, 0]), (9, [0, 1, 2, 3, 0, 1, 2, 3, 0])])
def test_unrolled_position_follows_the_branches_of_a_4_2_1_unroll(n, places):
    """4 per pass while more than 3 remain, 2 if more than 1 remains, then 1 at a time (scaled_loop's sm90 SASS)."""
    assert [fma_mod.unrolled_position(i, n, (4, 2, 1)) for i in range(n)] == places
    with pytest.raises(ValueError, match="iteration"):
        fma_mod.unrolled_position(n, n, (4, 2, 1))



def _rne_f32(q) -> float:  # noqa: ANN001 - a Fraction in fp32's normal range
    import math
    from fractions import Fraction

    e = math.floor(math.log2(abs(q)))
    e += 1 if abs(q) >= Fraction(2) ** (e + 1) else -1 if abs(q) < Fraction(2) ** e else 0
    ulp = Fraction(2) ** (e - 23)
    n = q / ulp
    r = math.floor(n)
    if n - r > Fraction(1, 2) or (n - r == Fraction(1, 2) and r % 2):
        r += 1
    return float(r * ulp)


def test_fp32_fma_is_one_rounding_next_to_fp32_midpoints():
    """``a * b + c`` just below the fp32 midpoint ``1 + 3 * 2^-24`` (``a = 1.5 + 3t 2^-23``, ``b = 2^-23 (1 - 4t
    2^-24)``: ``a * b = 3 * 2^-24 - 12 t^2 2^-70``), which float64 rounds onto the midpoint and a second rounding
    then rounds to even, up: ``fma.rn.f32`` rounds once, down. Alone, and in a batch whose other sums are exact
    midpoints (``0.75 * 0.75 + 2^-24``... exact ties, rounded to even)."""
    from fractions import Fraction

    t = np.arange(1, 101, dtype=np.float64)
    a = np.r_[1.5 + 3 * t * 2.0**-23, -(1.5 + 3 * t * 2.0**-23)].astype(np.float32)
    b = np.r_[2.0**-23 * (1 - 4 * t * 2.0**-24), 2.0**-23 * (1 - 4 * t * 2.0**-24)].astype(np.float32)
    c = np.r_[np.ones(100), -np.ones(100)].astype(np.float32)
    exact = np.array([_rne_f32(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)))
                      for x, y, z in zip(a, b, c, strict=True)], np.float32)
    naive = (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)
    assert (naive != exact).all()  # every case is one two roundings get wrong
    assert np.array_equal(numeric.fma(a, b, c, "fp32"), exact)
    ties = np.array([0.75, 1.25, 3.0], np.float32)
    for i in (0, 57, 150):
        assert numeric.fma(a[i:i + 1], b[i:i + 1], c[i:i + 1], "fp32")[0] == exact[i]
        mixed = numeric.fma(np.r_[a[i], ties], np.r_[b[i], ties], np.r_[c[i], np.full(3, 2.0**-24, np.float32)],
                            "fp32")
        assert mixed[0] == exact[i]


def test_an_fp32_product_read_out_of_a_vector_is_folded_on_sm90(compile_sm90):
    """The QSA cache kernel's RMS norm (in a helper, over a pooled row): Triton 3.6's SLP vectorizer pairs two squares
    into ``fmul <2 x float>`` and feeds each lane to the in-thread sum through ``extractelement``. sm90 splits the
    vector into scalars, so the combiner folds both lanes' adds: the PTX has those fma, and the rule must count
    them (fused_sites raises on a count the PTX does not have)."""
    from kernels.qsa.cache import _compress_store_kernel

    sig = {"keys_ptr": "*bf16", "w_ptr": "*bf16", "slot_ptr": "*i32", "kv_ptr": "*bf16", "stride_kt": "i32",
           "stride_kvb": "i32", "stride_kvp": "i32", "D": "i32", "eps": "fp32"}
    consts = {"RATIO": 3, "BLOCK_R": 4, "BLOCK_D": 128, "PAGE": 7, "IS_FP8": False, "FP8_LIM": 448.0,
              "EMULATE_ROUND": True}
    asm = compile_sm90(_compress_store_kernel, sig, consts, 4, frozenset(k for k in sig if k != "eps"))
    sites_ = fma_mod.fused_sites(asm["llir"], asm["ptx"])  # raises where the rule misses the PTX's count
    if "fadd <" not in asm["llir"]:  # scalar adds (3.6): the count is exact; vector adds (3.9) bound it by lanes
        assert "extractelement <2 x float>" in asm["llir"]
        assert sum(s.count for s in sites_) == fma_mod.ptx_fma_count(asm["ptx"]) == 3


def test_explicit_fma_calls_count_their_lanes():
    """``tl.fma`` on a vector that LLVM's SLP vectorizer packs is one ``@llvm.fma.v8f32`` call, which the backend
    scalarizes into 8 ``fma.rn.f32`` (Triton 3.9's LLIR and PTX of the turboquant store's reciprocal division):
    the explicit bound of the PTX count check counts lanes, not calls."""
    llir = "\\n".join([
        "  %260 = tail call <8 x float> @llvm.fma.v8f32(<8 x float> %259, <8 x float> %257, <8 x float> %254)",
        "  %261 = tail call float @llvm.fma.f32(float %1, float %2, float %3)",
        "  %262 = call <2 x bfloat> @llvm.nvvm.fma.rn.bf16x2(<2 x bfloat> %4, <2 x bfloat> %5, <2 x bfloat> %6)",
        "  %263 = call half @llvm.nvvm.fma.rn.f16(half %7, half %8, half %9)",
        "declare <8 x float> @llvm.fma.v8f32(<8 x float>, <8 x float>, <8 x float>)",
    ])
    assert fma_mod._explicit_lanes(llir) == 8 + 1 + 2 + 1
