"""FP8 tl.dot off the H200's instructions: what Triton 3.6/3.9 compile it to on sm80/sm86 (e5m2 converted to fp16,
mma.sync m16n8k16, kWidth=4 operand layouts), sm100 (the same below a warpgroup; tcgen05 above), sm120 (native FP8
mma.sync, no model), and what their front end refuses (e4m3 below sm89); the interpreter shim's instruction per arch.

The model's numbers are checked against a computation of their own: ml_dtypes' FP8 -> fp16 conversion and the k
order built slot by slot from the layout, through the fp16 rows; and built inputs whose result a wrong k order
changes, derived by hand. The compiler facts come from scripts/compile_dot_scaled_lowering.py --plain (Triton 3.6.0
and 3.9.0, 2026-12-04); the refusal is also checked against the installed Triton's front end.
"""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest
import torch

from harness import tensor_cores as tc
from harness.interp import differences, dots
from harness.interp.patch import Patch

_FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
_ML = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}

#: (arch, a, b, instr): FP8 pairs Triton converts to fp16 for mma.sync m16n8k16 (compiled with 3.6 and 3.9: every
#: tile on sm80/sm86, e5m2 only; 16x64 w4 and 64x64 w2 on sm90 and sm100), and the fp16 row that then runs
UPCAST = [("sm80", "e5m2", "e5m2", "wgmma", ("sm80", "fp16", "mma")),  # no wgmma on sm80: instr is ignored
          ("sm86", "e5m2", "e5m2", "mma", ("sm80", "fp16", "mma")),
          ("sm100", "e4m3", "e5m2", "mma", ("sm100", "fp16", "mma")),
          ("sm100", "e5m2", "e5m2", "mma", ("sm100", "fp16", "mma"))]


def _layout_order(K: int) -> list[int]:
    """The k that each slot of the m16n8k16 chain reads, built from the kWidth=4 layout: lane t of a quad holds k
    4t..4t+3 and 16 + 4t..16 + 4t + 3 of each 32-k span; the span's first instruction reads registers 0, 1 of each
    run (slots 2t, 2t+1 and 8 + 2t, 9 + 2t), the second registers 2, 3."""
    out = []
    for span in range(K // 32):
        for inst in range(2):
            slots = [0] * 16
            for t in range(4):
                for run in range(2):
                    for r in range(2):
                        slots[8 * run + 2 * t + r] = 32 * span + 16 * run + 4 * t + 2 * inst + r
            out += slots
    return out


def _fp8(g: torch.Generator, fmt: str, shape: tuple[int, int]) -> torch.Tensor:
    """Finite codes spread over the exponent range (wide enough that blocks truncate differently per order)."""
    codes = torch.randint(0, 256, shape, generator=g, dtype=torch.int64).to(torch.uint8)
    x = codes.view(_FP8[fmt])
    return torch.where(x.float().isfinite(), x.float(), torch.zeros(shape)).to(_FP8[fmt])


@pytest.mark.parametrize("arch,fa,fb,instr,row", UPCAST,
                         ids=[f"{u[0]}-{u[1]}x{u[2]}-{tc.MODELS[u[4]].provenance}" for u in UPCAST])
def test_upcast_fp8_is_the_fp16_row_in_the_layout_k_order(arch, fa, fb, instr, row):
    """ml_dtypes converts the codes to fp16 (exact), the operands are taken in the layout's order, and the arch's
    fp16 mma.sync row runs them: bit for bit, with and without an accumulator; the plain order differs somewhere."""
    g = torch.Generator().manual_seed(26)
    M, N, K = 16, 8, 128
    a, b = _fp8(g, fa, (M, K)), _fp8(g, fb, (K, N))
    acc = torch.randn(M, N, generator=g) * 64
    A = torch.from_numpy(a.view(torch.uint8).numpy().view(_ML[fa]).astype(np.float16))
    B = torch.from_numpy(b.view(torch.uint8).numpy().view(_ML[fb]).astype(np.float16))
    order = _layout_order(K)
    assert tc.fp8_model(arch, fa, fb, instr) == (tc.MODELS[row], True)
    for c in (None, acc):
        got = tc.dot(a, b, c, arch=arch, instr=instr)
        want = tc.dot(A[:, order], B[order], c, arch=row[0], instr="mma")
        assert torch.equal(got.view(torch.int32), want.view(torch.int32))
    plain = tc.dot(A, B, acc, arch=row[0], instr="mma")
    assert not torch.equal(plain, got), "the inputs cannot tell the k orders apart"


@pytest.mark.parametrize("arch", ["sm80", "sm90", "sm100"])
def test_built_inputs_need_the_layout_k_order(arch):
    """e5m2 x e5m2, K = 32: the product 2^26 at k = 2 and 1.0 at k = 0, 1, 4, 5, 8, 9, 12, 13. In the layout's
    order those eight ones are the first instruction's (slots 0-7: on sm80 one A100 block of 8), summed exactly to
    8 before the second instruction meets 2^26 with its step of 2 (sm80: 4): 2^26 + 8 (fp32 step 8). In the plain
    order 2^26 shares its block with the ones, each truncated away alone: 2^26."""
    a = torch.zeros(1, 32, dtype=torch.float8_e5m2)
    b = torch.zeros(32, 1, dtype=torch.float8_e5m2)
    a[0, 2], b[2, 0] = 2.0**13, 2.0**13
    for k in (0, 1, 4, 5, 8, 9, 12, 13):
        a[0, k], b[k, 0] = 1.0, 1.0
    assert tc.dot(a, b, arch=arch, instr="mma").item() == 2.0**26 + 8
    assert tc.dot(a.half(), b.half(), arch=arch, instr="mma").item() == 2.0**26  # the plain order


def test_upcast_k_must_be_whole_spans():
    a = torch.zeros(4, 48, dtype=torch.float8_e5m2)
    with pytest.raises(NotImplementedError, match=r"FP8 under mma.sync: K=48 is not a multiple of 32"):
        tc.dot(a, a.T.contiguous(), arch="sm80")


@pytest.mark.parametrize("arch", ["sm80", "sm86"])
@pytest.mark.parametrize("fa,fb", [("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3")])
def test_e4m3_below_sm89_is_refused_as_the_front_end_refuses_it(arch, fa, fb):
    """Triton 3.6 and 3.9 refuse every pair with e4m3 for sm80/sm86 in the front end ("type fp8e4nv not supported in
    this architecture"); dot and error_bound raise that refusal, naming the arch and the pair."""
    a, b = torch.zeros(16, 32, dtype=_FP8[fa]), torch.zeros(32, 8, dtype=_FP8[fb])
    msg = rf"an {fa} x {fb} tl.dot does not compile for {arch}: .*fp8e4nv not supported in this architecture"
    with pytest.raises(tc.DotRefused, match=msg):
        tc.dot(a, b, arch=arch, instr="mma")
    with pytest.raises(tc.DotRefused, match=msg):
        tc.error_bound(arch, fa, fb, 32, instr="mma")
    assert issubclass(tc.DotRefused, NotImplementedError)


triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


@triton.jit
def _one_dot(a_ptr, b_ptr, o_ptr):
    r = tl.arange(0, 16)
    a = tl.load(a_ptr + r[:, None] * 32 + tl.arange(0, 32)[None, :])
    b = tl.load(b_ptr + tl.arange(0, 32)[:, None] * 16 + r[None, :])
    tl.store(o_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, b))


@pytest.mark.lane_independent
@pytest.mark.parametrize("pair", [("e4m3", "e5m2"), ("e5m2", "e4m3")])
def test_the_installed_front_end_refuses_e4m3_for_sm80(pair):
    """The refusal is the installed Triton's: a tl.dot with an fp8e4nv operand does not get past the front end for
    sm80, as fp8_model says (cheap: no PTX is built)."""
    from harness.compile.matrix import compile_matrix, error_line

    ptr = {"e4m3": "*fp8e4nv", "e5m2": "*fp8e5"}
    sig = {"a_ptr": ptr[pair[0]], "b_ptr": ptr[pair[1]], "o_ptr": "*fp32"}
    res = compile_matrix(_one_dot, signature=sig, targets=["sm80"])["sm80"]
    assert isinstance(res, Exception), "compiled for sm80"
    assert "type fp8e4nv not supported in this architecture" in error_line(res), error_line(res)
    with pytest.raises(tc.DotRefused, match="not supported in this architecture"):
        tc.fp8_model("sm80", *pair)


def test_fp8_without_a_model_says_why():
    e5 = torch.zeros(64, 32, dtype=torch.float8_e5m2)
    with pytest.raises(NotImplementedError, match=r"sm103's tcgen05.mma numerics are unverified"):
        tc.dot(e5, e5.T.contiguous(), arch="sm103", instr="tcgen05")
    with pytest.raises(NotImplementedError, match=r"on sm120 .*: the published models disagree: the toolbox .* B200 "
                                                  r"model, c aligned .* mmaemu 0.1.0 refuses sm_120"):
        tc.dot(e5, e5.T.contiguous(), arch="sm120", instr="mma")
    with pytest.raises(tc.DotRefused):  # e4m3 is refused before any model is looked up
        tc.dot(e5.to(torch.float8_e4m3fn), e5.T.contiguous(), arch="sm75", instr="mma")
    with pytest.raises(NotImplementedError, match="no model of FP8 dots on sm75"):
        tc.dot(e5, e5.T.contiguous(), arch="sm75", instr="mma")


#: tile (M, num_warps) -> what Triton 3.6 and 3.9 emit on sm100 (fp16, e5m2 and every FP8 pair alike)
SM100_TILES = {(128, 4): "tcgen05", (64, 4): "tcgen05", (128, 8): "tcgen05", (64, 8): "tcgen05", (256, 4): "tcgen05",
               (16, 4): "mma", (32, 4): "mma", (64, 2): "mma", (64, 1): "mma", (16, 1): "mma"}


def test_the_shim_names_each_archs_instruction():
    """sm80, sm86, sm89, sm120: mma.sync for every tile; sm100: tcgen05 where sm90 has wgmma (compiled tiles)."""
    for (m, w), name in SM100_TILES.items():
        assert dots.instruction(m, w, arch="sm100") == name, (m, w)
        assert dots.instruction(m, w, arch="sm90") == {"tcgen05": "wgmma", "mma": "mma"}[name], (m, w)
        for arch in ("sm80", "sm86", "sm89", "sm120"):
            assert dots.instruction(m, w, arch=arch) == "mma", (arch, m, w)


def _handle(itp, tl, x: torch.Tensor):
    dt = {torch.float8_e5m2: tl.float8e5, torch.float8_e4m3fn: tl.float8e4nv, torch.float32: tl.float32}[x.dtype]
    data = x.view(torch.uint8).numpy() if x.dtype.itemsize == 1 else x.numpy()
    return itp.TensorHandle(np.ascontiguousarray(data), dt)


def test_the_shim_runs_each_archs_fp8_dot():
    """The tl.dot shim installed for sm80 / sm100 (over the interpreter's own method): an e5m2 tile is the upcast
    model on sm80 and on sm100 below a warpgroup, a 64-row tile on 4 warps on sm100 is the tcgen05 kind::f8f6f4
    model (no fallback, no warning), and e4m3 on sm80 raises the refusal naming the arch."""
    itp = pytest.importorskip("triton.runtime.interpreter")
    tl = pytest.importorskip("triton.language")
    g = torch.Generator().manual_seed(3)
    a16, b = _fp8(g, "e5m2", (16, 32)), _fp8(g, "e5m2", (32, 8))
    a64 = _fp8(g, "e5m2", (64, 32))
    with dots.suspended():
        for arch in ("sm80", "sm100"):
            # the warnings are armed with the bf16-arithmetic shim (the interpreter lane has them on; the GPU
            # lane does not): installed here, with the tl.dot shim, in a layer of the test's own
            with Patch.context() as patch:
                differences.install(patch)
                dots.install(patch, arch)
                create = itp.InterpreterBuilder.create_dot
                d = torch.zeros(16, 8)
                out = create(None, _handle(itp, tl, a16), _handle(itp, tl, b), _handle(itp, tl, d), None, 0)
                assert torch.equal(torch.from_numpy(out.data), tc.dot(a16, b, d, arch=arch, instr="mma"))
                if arch == "sm80":
                    e4 = a16.float().to(torch.float8_e4m3fn)
                    with pytest.raises(tc.DotRefused, match="tl.dot on sm80: an e4m3 x e5m2 tl.dot does not compile"):
                        create(None, _handle(itp, tl, e4), _handle(itp, tl, b), _handle(itp, tl, d), None, 0)
                else:
                    d = torch.zeros(64, 8)
                    with warnings.catch_warnings(record=True) as seen:
                        warnings.simplefilter("always")
                        out = create(None, _handle(itp, tl, a64), _handle(itp, tl, b), _handle(itp, tl, d), None, 0)
                    want = tc.dot(a64, b, d, arch="sm100", instr="tcgen05")  # kind::f8f6f4, the published model
                    assert torch.equal(torch.from_numpy(out.data).view(torch.int32), want.view(torch.int32))
                    assert not any("tl.dot" in str(w.message) for w in seen), [str(w.message) for w in seen]
