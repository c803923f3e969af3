"""The interpreter shim of issue 38 (:mod:`harness.interp.lowering`) computes what the model derived from the
launch's compiled kernel says: a fused ``x * s + b`` with one rounding, a row sum / sum of squares / cumsum /
argmax in the compiled order, on the Triton lane this runs on (3.6 folds a thread's registers left to right, 3.9
combines them in a pairwise tree). Where it cannot model, it warns and computes what the interpreter computes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from harness.interp import lowering as shim
from harness.lowering import compiled, numeric, reduce_order, scan_order

pytestmark = pytest.mark.interp_only
triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")
tl = pytest.importorskip("triton.language")

ROWS = 8
_NP = {"fp32": np.float32, "fp16": np.float16, "bf16": np.uint16}
_TORCH = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def _k():
    from tests.lowering import kernels

    return kernels


def _bits(t: torch.Tensor, dt: str) -> np.ndarray:
    """A CPU tensor as the interpreter holds it (bf16 as uint16 patterns)."""
    return t.view(torch.int16).numpy().view(np.uint16) if dt == "bf16" else t.numpy()


def _facts(fn, args, kwargs):
    spec = compiled.specialize(fn, args, kwargs)
    facts = compiled.lowering_for(fn, spec.signature, spec.constexprs, num_warps=spec.num_warps, arch="sm90",
                                  fp_fusion=spec.fp_fusion, divisible=spec.divisible)
    assert not facts.error, facts.error
    return facts


def _run(fn, grid, args, kwargs, *, plain: bool = False) -> list[str]:
    """Launch; the harness warnings it gave. ``plain``: with this shim lifted (the interpreter's own order)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        if plain:
            with shim.suspended():
                fn[grid](*args, **kwargs)
        else:
            fn[grid](*args, **kwargs)
    return [str(w.message) for w in seen if "harness:" in str(w.message)]


def test_installed_on_the_interpreter_lane():
    assert shim.installed()


@pytest.mark.parametrize("dt", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize(("n", "warps"), [(1024, 4), (256, 1)])
def test_row_sum_is_the_compiled_order(dt, n, warps):
    k = _k()
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(ROWS, n, generator=g) * 3).to(_TORCH[dt])
    y, y0 = (torch.empty(ROWS, dtype=_TORCH[dt]) for _ in range(2))
    kw = {"N": n, "BLOCK_M": 1, "num_warps": warps}
    got = _run(k.row_sum, (ROWS,), (x, y, ROWS), kw)
    assert not [m for m in got if " sum on " in m], got  # modelled: no sum-order warning
    _run(k.row_sum, (ROWS,), (x, y0, ROWS), kw, plain=True)
    (r,) = _facts(k.row_sum, (x, y, ROWS), kw).reductions
    plan = reduce_order.ReducePlan(r.bits, reduce_order.rule_for(triton.__version__))
    (want,) = reduce_order.reduce(_bits(x, dt), 1, plan, "add", dt)
    out, plain = _bits(y, dt), _bits(y0, dt)
    np.testing.assert_array_equal(out, want)
    assert (out != plain).any(), "the inputs must be ones where the compiled order changes a sum"
    if dt == "fp32":  # and it is not a left-to-right sum either
        assert (out != np.cumsum(x.numpy(), axis=1, dtype=np.float32)[:, -1]).any()
    # the other Triton version's in-thread order gives other sums: the lane's own rule is what ran
    other = next(v for v in reduce_order.RULES.values() if v.triton != plan.rule.triton)
    if plan.thread_combines() > 1 and not plan.packed(dt, "add"):
        (theirs,) = reduce_order.reduce(_bits(x, dt), 1, reduce_order.ReducePlan(r.bits, other), "add", dt)
        assert (theirs != out).any()


def test_affine_is_one_fma():
    k = _k()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4096, generator=g)
    y = torch.empty_like(x)
    got = _run(k.affine, (4,), (x, y, 1.37, -0.41, 4096), {"BLOCK": 1024, "num_warps": 4})
    assert not [m for m in got if "fma_contraction" in m], got
    (f,) = _facts(k.affine, (x, y, 1.37, -0.41, 4096), {"BLOCK": 1024, "num_warps": 4}).fused
    assert f.op == "fadd" and f.mul is not None
    s, b = np.float32(1.37), np.float32(-0.41)
    want = numeric.fma(x.numpy(), s, b, "fp32")
    np.testing.assert_array_equal(y.numpy(), want)
    assert (want != x.numpy() * s + b).any()


@pytest.mark.parametrize("dt", ["fp32", "bf16", "fp16"])
def test_fma_elementwise_is_one_rounding(dt):
    k = _k()
    g = torch.Generator().manual_seed(10)
    a, b, c = (torch.randn(4096, generator=g).to(_TORCH[dt]) for _ in range(3))
    y = torch.empty_like(a)
    args, kw = (a, b, c, y, 4096), {"BLOCK": 1024, "num_warps": 4}
    got = _run(k.fma_elementwise, (4,), args, kw)
    assert not [m for m in got if "fma_contraction" in m], got
    (f,) = _facts(k.fma_elementwise, args, kw).fused
    assert f.op == "fadd" and f.mul is not None
    want = numeric.fma(_bits(a, dt), _bits(b, dt), _bits(c, dt), dt)
    np.testing.assert_array_equal(_bits(y, dt), want)
    two = numeric.add(numeric.mul(_bits(a, dt), _bits(b, dt), dt), _bits(c, dt), dt)
    assert (want != two).any()


def test_a_bf16_pair_with_fp32_scalar_arguments_is_the_compiled_fp32_fma():
    """``bf16 * s + b`` with float arguments: the compiled kernel promotes to fp32 (extf, mulf, addf, truncf in its
    TTIR) and contracts the pair; the interpreter, given the arguments as fp32 scalars as compiled
    (:func:`harness.interp.jit.fix_float_args`), computes the same one-rounding fp32 fma, then rounds to bf16."""
    k = _k()
    x = torch.randn(1024, generator=torch.Generator().manual_seed(11)).bfloat16()
    y = torch.empty_like(x)
    args, kw = (x, y, 1.37, -0.41, 1024), {"BLOCK": 1024, "num_warps": 4}
    got = _run(k.affine, (1,), args, kw)
    assert not [m for m in got if "fma_contraction" in m], got
    (f,) = _facts(k.affine, args, kw).fused
    assert f.op == "fadd" and f.mul is not None
    s, b = np.float32(1.37), np.float32(-0.41)
    want = torch.from_numpy(numeric.fma(x.float().numpy(), s, b, "fp32")).bfloat16()
    assert torch.equal(y.view(torch.int16), want.view(torch.int16))
    from harness.interp.jit import FLOAT_TAG
    from harness.interp.patch import lift

    with lift(FLOAT_TAG):  # the arguments as Python floats: the interpreter computes in bf16
        _run(k.affine, (1,), args, kw)
    assert not torch.equal(y.view(torch.int16), want.view(torch.int16))  # the inputs tell the two apart


def test_sum_of_products_fuses_the_in_thread_adds():
    k = _k()
    g = torch.Generator().manual_seed(4)
    x = torch.randn(ROWS, 4096, generator=g)
    y = torch.empty(ROWS)
    kw = {"N": 4096, "num_warps": 8}
    _run(k.sum_of_squares, (ROWS,), (x, y), kw)
    facts = _facts(k.sum_of_squares, (x, y), kw)
    (r,) = facts.reductions
    assert any(f.add == r.where for f in facts.fused), "the compiled kernel fuses the square into the sum"
    plan = reduce_order.ReducePlan(r.bits, reduce_order.rule_for(triton.__version__))
    sq = numeric.mul(x.numpy(), x.numpy(), "fp32")
    (want,) = reduce_order.reduce(sq, 1, plan, "add", "fp32", factors=(x.numpy(), x.numpy()))
    (unfused,) = reduce_order.reduce(sq, 1, plan, "add", "fp32")
    np.testing.assert_array_equal(y.numpy(), want)
    assert (want != unfused).any()


@pytest.mark.parametrize("dt", ["fp16", "bf16"])
def test_a_16bit_sum_of_products_fuses_the_adds_the_compiled_kernel_fuses(dt):
    """Triton 3.6 on sm90: LLVM packs a 16-bit tl.sum(x * x)'s registers in pairs, and an add fed by a product
    through a lane shuffle stays unfused: the interpreter's sum is the sequential fold with the facts'
    ``thread_fma`` pattern, not one fused at every add."""
    rule = reduce_order.rule_for(triton.__version__)
    if rule.thread != "sequential":
        pytest.skip(f"Triton {triton.__version__} adds a thread's registers as a tree (thread_fma is 3.6's)")
    k = _k()
    g = torch.Generator().manual_seed(38)
    x = torch.randn(64, 1024, generator=g).to(_TORCH[dt])
    y = torch.empty(64, dtype=_TORCH[dt])
    kw = {"N": 1024, "num_warps": 4}
    _run(k.sum_of_squares, (64,), (x, y), kw)
    (r,) = _facts(k.sum_of_squares, (x, y), kw).reductions
    assert r.thread_fma is not None and not all(r.thread_fma)
    plan = reduce_order.ReducePlan(r.bits, rule)
    xs = _bits(x, dt)
    sq = numeric.mul(xs, xs, dt)
    (want,) = reduce_order.reduce(sq, 1, plan, "add", dt, factors=(xs, xs), fused_steps=r.thread_fma)
    (all_fused,) = reduce_order.reduce(sq, 1, plan, "add", dt, factors=(xs, xs))
    np.testing.assert_array_equal(_bits(y, dt), want)
    assert (want != all_fused).any()


@pytest.mark.parametrize("dt", ["fp32", "bf16"])
def test_cumsum_is_the_compiled_scan(dt):
    k = _k()
    g = torch.Generator().manual_seed(5)
    x = torch.randn(ROWS, 1024, generator=g).to(_TORCH[dt])
    y = torch.empty_like(x)
    got = _run(k.row_cumsum, (ROWS,), (x, y), {"N": 1024, "num_warps": 4})
    assert not [m for m in got if " scan on " in m], got
    (s,) = _facts(k.row_cumsum, (x, y), {"N": 1024, "num_warps": 4}).scans
    # Triton 3.6's tl.cumsum promotes bf16 to fp32 (standard.py: _promote_bfloat16_to_float32), 3.9's does not:
    # the scan runs in the compiled element type, the store rounds to the output's
    sdt = {"f32": "fp32", "bf16": "bf16"}[s.elem]
    xs = numeric.from_f32(numeric.to_f32(_bits(x, dt), dt), sdt)
    want = numeric.from_f32(numeric.to_f32(scan_order.scan(xs, 1, scan_order.plan(s.bits), "add", sdt), sdt), dt)
    np.testing.assert_array_equal(_bits(y, dt), want)
    sequential = [xs[:, 0]]  # what the interpreter computes: one rounded add per step, left to right
    for j in range(1, xs.shape[1]):
        sequential.append(numeric.add(sequential[-1], xs[:, j], dt))
    assert (want != numeric.from_f32(numeric.to_f32(np.stack(sequential, axis=1), sdt), dt)).any()


def test_argmax_with_ties_and_nan_is_the_compiled_order():
    k = _k()
    g = torch.Generator().manual_seed(6)
    x = torch.randint(-8, 8, (ROWS, 1024), generator=g).float()
    x[torch.rand(ROWS, 1024, generator=g) < 0.01] = float("nan")
    x[0] = float("nan")
    x[1] = 0.0
    x[1, ::3] = -0.0
    v, i = torch.empty(ROWS), torch.empty(ROWS, dtype=torch.int32)
    _run(k.row_max_argmax, (ROWS,), (x, v, i), {"N": 1024, "num_warps": 4})
    facts = _facts(k.row_max_argmax, (x, v, i), {"N": 1024, "num_warps": 4})
    kinds = {r.kind: r for r in facts.reductions}
    rule = reduce_order.rule_for(triton.__version__)
    (vmax,) = reduce_order.reduce(x.numpy(), 1, reduce_order.ReducePlan(kinds["max"].bits, rule), "max", "fp32")
    idx = np.broadcast_to(np.arange(1024, dtype=np.int32), x.shape)
    _, imax = reduce_order.reduce((x.numpy(), idx), 1, reduce_order.ReducePlan(kinds["argmax"].bits, rule),
                                  "argmax", "fp32")
    got = v.numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(vmax))  # NaN bits: the interpreter's (see below)
    np.testing.assert_array_equal(got[~np.isnan(got)].view(np.uint32), vmax[~np.isnan(vmax)].view(np.uint32))
    assert np.isnan(got[0]) and got[1] == 0 and not np.signbit(got[1])  # all-NaN row; +0 wins over -0
    np.testing.assert_array_equal(i.numpy(), imax)


@triton.jit
def _reverse_cumsum(x_ptr, y_ptr, N: tl.constexpr):
    cols = tl.arange(0, N)
    tl.store(y_ptr + cols, tl.cumsum(tl.load(x_ptr + cols), axis=0, reverse=True))


def test_reverse_scan_warns_and_keeps_the_interpreters_scan():
    x = torch.randn(256, generator=torch.Generator().manual_seed(7))
    y, y0 = torch.empty_like(x), torch.empty_like(x)
    got = _run(_reverse_cumsum, (1,), (x, y), {"N": 256})
    _run(_reverse_cumsum, (1,), (x, y0), {"N": 256}, plain=True)
    assert any("reverse scans are not modelled" in m for m in got), got
    assert torch.equal(y, y0)


def test_no_compiled_kernel_warns_once_and_keeps_the_interpreter(monkeypatch):
    k = _k()

    def refuse(*args, **kwargs):
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(compiled, "lowering_for", refuse)
    x = torch.randn(4096, generator=torch.Generator().manual_seed(8))
    y, y0 = torch.empty_like(x), torch.empty_like(x)
    got = _run(k.affine, (4,), (x, y, 1.37, -0.41, 4096), {"BLOCK": 1024, "num_warps": 4})
    _run(k.affine, (4,), (x, y0, 1.37, -0.41, 4096), {"BLOCK": 1024, "num_warps": 4}, plain=True)
    assert torch.equal(y, y0)
    assert any("no compiler here" in m and "op lowering" in m for m in got), got
    assert any("fma_contraction" in m and "no compiler here" in m for m in got), got


def test_a_failure_inside_the_shim_falls_back_with_one_warning(monkeypatch):
    k = _k()

    def broken(*args, **kwargs):
        raise ArithmeticError("model bug")

    monkeypatch.setattr(reduce_order, "reduce", broken)
    x = torch.randn(ROWS, 1024, generator=torch.Generator().manual_seed(9))
    y, y0 = torch.empty(ROWS), torch.empty(ROWS)
    got = _run(k.row_sum, (ROWS,), (x, y, ROWS), {"N": 1024, "BLOCK_M": 1, "num_warps": 4})
    _run(k.row_sum, (ROWS,), (x, y0, ROWS), {"N": 1024, "BLOCK_M": 1, "num_warps": 4}, plain=True)
    assert torch.equal(y, y0)
    assert [m for m in got if "model bug" in m] and len([m for m in got if "model bug" in m]) == 1, got


def test_nan_payloads_stay_the_interpreters():
    """A fused pair or a reduction with a NaN keeps the interpreter's NaN bits: which payload the GPU gives is not
    measured, and a kernel compared with another kernel's interpreter output must not change because of it."""
    k = _k()
    g = torch.Generator().manual_seed(12)
    a, b, c = (torch.randn(1024, generator=g) for _ in range(3))
    c[:7] = torch.tensor([0x7FC0_1234, -0x003F_EDCC, 0x7F80_0001, 0x7FC0_0000, 1, 2, 3], dtype=torch.int32).view(
        torch.float32)
    y, y0 = torch.empty_like(a), torch.empty_like(a)
    args = {"BLOCK": 1024, "num_warps": 4}
    _run(k.fma_elementwise, (1,), (a, b, c, y, 1024), args)
    _run(k.fma_elementwise, (1,), (a, b, c, y0, 1024), args, plain=True)
    nan = torch.isnan(y0)
    assert nan[:4].all() and torch.equal(torch.isnan(y), nan)
    assert torch.equal(y[nan].view(torch.int32), y0[nan].view(torch.int32))
    x = torch.randn(ROWS, 1024, generator=g)
    x[2, 5] = c[0]
    s, s0 = torch.empty(ROWS), torch.empty(ROWS)
    _run(k.row_sum, (ROWS,), (x, s, ROWS), {"N": 1024, "BLOCK_M": 1, "num_warps": 4})
    _run(k.row_sum, (ROWS,), (x, s0, ROWS), {"N": 1024, "BLOCK_M": 1, "num_warps": 4}, plain=True)
    assert torch.isnan(s[2]) and s[2:3].view(torch.int32).item() == s0[2:3].view(torch.int32).item()


@triton.jit
def _rows_softmax_stages(x_ptr, y_ptr, n_rows, N: tl.constexpr, num_stages: tl.constexpr):
    # the Triton tutorial's fused softmax names a parameter like the launch option, and passes it to tl.range
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=num_stages):
        x = tl.load(x_ptr + row * N + tl.arange(0, N))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row * N + tl.arange(0, N), e / tl.sum(e, axis=0))


def test_a_parameter_named_like_a_launch_option_binds_to_the_kernel():
    """``num_stages=2`` is the kernel's parameter and the compile option at once, as in Triton's own launch: the
    compiled kernel for the facts is had (before, binding dropped it: "missing a required argument")."""
    x = torch.randn(8, 256, generator=torch.Generator().manual_seed(21))
    y = torch.empty_like(x)
    args, kw = (x, y, 8), {"N": 256, "num_stages": 2, "num_warps": 4}
    spec = compiled.specialize(_rows_softmax_stages, args, kw)
    assert spec.constexprs.get("num_stages") == 2
    got = _run(_rows_softmax_stages, (2,), args, kw)
    assert not [m for m in got if "could not be had" in m], got
    (r_max, r_sum) = sorted(_facts(_rows_softmax_stages, args, kw).reductions, key=lambda r: r.kind)
    assert {r_max.kind, r_sum.kind} == {"max", "add"}


def test_pair_sides_reads_which_product_each_fma_folds():
    from harness.lowering.fma import pair_sides

    ptx = """
        mul.f32 	%r61, %r4, %r4;
        mul.f32 	%r69, %r10, %r10;
        fma.rn.f32 	%r72, %r11, %r11, %r69;
        fma.rn.f32 	%r79, %r3, %r3, %r61;
        fma.rn.f32 	%r80, %r5, %r5, %r79;
    """
    # pairs ordered by their first register: (3, 4) folds 3's square, (10, 11) folds 11's; the last fma adds to
    # an fma, no product pair
    assert pair_sides(ptx) == (0, 1)


def test_tree_sum_folds_the_product_the_compiled_kernel_folds():
    """Triton 3.9's rms_norm at 16 fp32 elements a thread (4 warps): its PTX folds the right-hand square in some
    first-level pairs (golden/lowering/triton3.9/rms_norm.npz is what the H100 computes of it); the facts carry
    them, and the reduce model follows them (other values than the all-left fold)."""
    k = _k()
    if reduce_order.rule_for(triton.__version__).thread == "sequential":
        pytest.skip("Triton 3.6 folds a thread's elements in sequence: no pairs")
    g = torch.Generator().manual_seed(7)
    x = torch.randn(ROWS, 4096, generator=g)
    w, y, r = torch.ones(4096), torch.empty(ROWS, 4096), torch.empty(ROWS)
    kw = {"BLOCK": 4096, "num_warps": 4}
    facts = _facts(k.rms_norm, (y, x, w, r, 4096, 1e-6), kw)
    (red,) = facts.reductions
    assert red.sides is not None and 1 in red.sides and 0 in red.sides, red.sides
    plan = reduce_order.ReducePlan(red.bits, reduce_order.rule_for(triton.__version__))
    many = torch.randn(256, 4096, generator=g).numpy()  # rows enough that the fold order shows
    sq = numeric.mul(many, many, "fp32")
    f = (many, many)
    (theirs,) = reduce_order.reduce(sq, 1, plan, "add", "fp32", factors=f, sides=red.sides)
    (left,) = reduce_order.reduce(sq, 1, plan, "add", "fp32", factors=f)
    assert (theirs != left).any()


def test_a_quotient_contracted_on_the_line_of_its_sum_of_squares_is_seen():
    """rms_norm's `rsqrt(tl.sum(x * x) / n_cols + eps)` on one line: that line's `mul.f32` (a square only the
    sum's first fma reads) is no pair ptxas could contract, so the FFMA its SASS has beyond the PTX's fma is the
    quotient's (the H100 goldens at N = 5000, 16 warps, match only with it, on both Tritons)."""
    import inspect

    from harness.lowering.fma import nvdisasm

    if nvdisasm() is None:
        pytest.skip("no nvdisasm with this Triton: the SASS cannot be read")
    k = _k()
    x, w, y, r = torch.zeros(ROWS, 5000), torch.ones(5000), torch.empty(ROWS, 5000), torch.empty(ROWS)
    facts = _facts(k.rms_norm, (y, x, w, r, 5000, 1e-6), {"BLOCK": 8192, "num_warps": 16})
    src, first = inspect.getsourcelines(k.rms_norm.fn)
    line = first + next(i for i, s in enumerate(src) if "tl.math.rsqrt" in s)
    assert any(n == line and f.endswith("kernels.py") for f, n in facts.quotient_lines), facts.quotient_lines


def _scaled_loop_sass(x: np.ndarray, y: np.ndarray, s: float, k: int) -> np.ndarray:
    """``scaled_loop`` as its sm90 SASS runs it, transcribed (Triton 3.6.0 with ptxas 12.8 and 3.9.0 with ptxas 13.4
    give the same code for BLOCK 128 to 1024, one chain per element; ``nvdisasm -g``): ``p = FMUL x, s``; while
    more than 3 iterations remain ``FADD``, 3 ``FFMA acc, 0.75, p``, ``FMUL``; if more than 1 remains ``FADD``,
    ``FFMA``, ``FMUL``; then ``FADD``, ``FMUL`` per iteration left. K = 1 compiles to another kernel (below)."""
    q = np.float32(0.75)
    if k == 1:  # Triton's JIT makes K = 1 a constexpr: one unrolled body, where LLVM contracts `x * s + y`
        return np.asarray(numeric.fma(x, np.full_like(x, s), y, "fp32"), np.float32) * q
    p = x.astype(np.float32) * np.float32(s)
    acc = y.astype(np.float32).copy()

    def fma(a: np.ndarray) -> np.ndarray:
        return np.asarray(numeric.fma(a, np.full_like(a, q), p, "fp32"), np.float32)

    left = max(k, 0)
    while left > 3:
        left -= 4
        acc = fma(fma(fma(acc + p))) * q
    if left > 1:
        left -= 2
        acc = fma(acc + p) * q
    while left:
        left -= 1
        acc = (acc + p) * q
    return acc


@pytest.mark.parametrize(("n", "k"), [(128, 0), (128, 1), (128, 6), (128, 7), (128, 16), (512, 13)])
def test_a_loop_carried_product_is_contracted_as_ptxas_unrolled_it(n, k):
    """``acc = (acc + p) * 0.75`` in a loop: ptxas unrolls it 4, 2, 1 and contracts each multiply with the next
    iteration's add inside an unrolled block (:func:`harness.lowering.fma.ptxas_unrolled`). The shim computes the
    transcribed SASS bit for bit, with no warning, for trip counts that leave every remainder."""
    from harness.lowering.fma import nvdisasm

    if nvdisasm() is None:
        pytest.skip("no nvdisasm with this Triton: the SASS cannot be read")
    k_ = _k()
    g = torch.Generator().manual_seed(n + k)
    x, y = torch.randn(n, generator=g), torch.randn(n, generator=g)
    want = _scaled_loop_sass(x.numpy(), y.numpy(), 0.9, k)
    out = y.clone()
    said = _run(k_.scaled_loop, (1,), (x, out, 0.9, k), {"BLOCK": n, "num_warps": 4})
    assert said == []
    assert np.array_equal(out.numpy().view(np.uint32), want.view(np.uint32)), \
        f"{int((out.numpy() != want).sum())} of {n} outputs differ from the transcribed SASS"
    if k >= 6:  # the contraction shows: two roundings per pair differ somewhere
        plain = y.clone()
        _run(k_.scaled_loop, (1,), (x, plain, 0.9, k), {"BLOCK": n, "num_warps": 4}, plain=True)
        assert not np.array_equal(plain.numpy(), want)


@triton.jit
def _loop_with_computed_range(x_ptr, y_ptr, s, K, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    p = tl.load(x_ptr + offs).to(tl.float32) * s
    acc = tl.load(y_ptr + offs).to(tl.float32)
    for _ in range(K + 0):
        acc = acc + p
        acc = acc * 0.75
    tl.store(y_ptr + offs, acc)


def test_a_loop_whose_range_cannot_be_read_warns_and_keeps_two_roundings():
    """The same loop as scaled_loop (ptxas contracts it alike) with a range the shim does not evaluate (``K + 0``):
    it says so, naming the line, and computes the interpreter's two roundings there."""
    from harness.lowering.fma import nvdisasm

    if nvdisasm() is None:
        pytest.skip("no nvdisasm with this Triton: the SASS cannot be read")
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(128, generator=g), torch.randn(128, generator=g)
    facts = _facts(_loop_with_computed_range, (x, y.clone(), 0.9, 7), {"BLOCK": 128})
    assert [c.unroll for c in facts.carried] == [(4, 2, 1)]
    out, plain = y.clone(), y.clone()
    said = _run(_loop_with_computed_range, (1,), (x, out, 0.9, 7), {"BLOCK": 128})
    _run(_loop_with_computed_range, (1,), (x, plain, 0.9, 7), {"BLOCK": 128}, plain=True)
    assert any("fma_contraction" in w and "no name or integer" in w and "not modelled" in w for w in said), said
    assert np.array_equal(out.numpy().view(np.uint32), plain.numpy().view(np.uint32))


@triton.jit
def _loop_in_a_loop(x_ptr, y_ptr, s, K, M, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    p = tl.load(x_ptr + offs).to(tl.float32) * s
    acc = tl.load(y_ptr + offs).to(tl.float32)
    for j in range(M):
        n = K - j * 3
        for _ in range(n):
            acc = acc + p
            acc = acc * 0.75
    tl.store(y_ptr + offs, acc)


def test_a_loop_inside_a_loop_is_not_read_and_warns():
    """ptxas contracts the inner loop's pair too, but its SASS is not the one shape read (the inner loop sits in
    the outer one's blocks): reported at the add's line, the interpreter's two roundings kept."""
    from harness.lowering.fma import nvdisasm

    if nvdisasm() is None:
        pytest.skip("no nvdisasm with this Triton: the SASS cannot be read")
    g = torch.Generator().manual_seed(6)
    x, y = torch.randn(128, generator=g), torch.randn(128, generator=g)
    facts = _facts(_loop_in_a_loop, (x, y.clone(), 0.9, 7, 2), {"BLOCK": 128})
    assert facts.carried == () and len(facts.unmodelled_ptxas_lines()) == 1
    out, plain = y.clone(), y.clone()
    said = _run(_loop_in_a_loop, (1,), (x, out, 0.9, 7, 2), {"BLOCK": 128})
    _run(_loop_in_a_loop, (1,), (x, plain, 0.9, 7, 2), {"BLOCK": 128}, plain=True)
    line = facts.unmodelled_ptxas_lines()[0][1]
    assert any("fma_contraction" in w and f":{line}" in w and "not modelled" in w for w in said), said
    assert np.array_equal(out.numpy().view(np.uint32), plain.numpy().view(np.uint32))
