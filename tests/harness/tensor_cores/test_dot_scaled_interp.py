"""tl.dot_scaled on the interpreter lane is harness.tensor_cores.dot_scaled bit for bit (harness.interp.scaled_dots,
installed by the plugin): operand formats, scale codes 0 and 255, unscaled operands, e2m1 packed along M, NVFP4's
e4m3 scales decoded as e4m3; where the compiler refuses (Triton 3.6 on sm90), the kernel fails with the reason.
On Triton 3.6, whose interpreter has no dot_scaled, the shim provides it."""

from __future__ import annotations

import pytest
import torch

from harness.compile.launches import expect_compile_failure
from harness.tensor_cores import lowering_for
from harness.versions import triton_at_least

pytestmark = pytest.mark.interp_only

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

M, N, K = 64, 32, 64


@triton.jit
def _dot_scaled_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr,
                       K: tl.constexpr, FA: tl.constexpr, FB: tl.constexpr, PA: tl.constexpr, PB: tl.constexpr,
                       KPA: tl.constexpr, SA: tl.constexpr, SB: tl.constexpr, G: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    if KPA:
        a = tl.load(a_ptr + rm[:, None] * (K // PA) + tl.arange(0, K // PA)[None, :])
    else:
        a = tl.load(a_ptr + tl.arange(0, M // PA)[:, None] * K + tl.arange(0, K)[None, :])
    b = tl.load(b_ptr + tl.arange(0, K // PB)[:, None] * N + rn[None, :])
    if FA == "bf16":  # 16-bit operands converted (a no-op as launched): capture's widened pointer variants compile
        a = a.to(tl.bfloat16)
    if FA == "fp16":
        a = a.to(tl.float16)
    if FB == "bf16":
        b = b.to(tl.bfloat16)
    if FB == "fp16":
        b = b.to(tl.float16)
    sa = None
    sb = None
    if SA:
        sa = tl.load(as_ptr + rm[:, None] * (K // G) + tl.arange(0, K // G)[None, :])
    if SB:
        sb = tl.load(bs_ptr + rn[:, None] * (K // G) + tl.arange(0, K // G)[None, :])
    acc = tl.load(c_ptr + rm[:, None] * N + rn[None, :]).to(tl.float32)  # converted: capture's widened variants
    acc = tl.dot_scaled(a, sa, FA, b, sb, FB, acc, lhs_k_pack=KPA)
    tl.store(o_ptr + rm[:, None] * N + rn[None, :], acc)


# Triton 3.9's emulation upcasts e4m3/e5m2 (and e2m1 towards fp16) with cvt ... .e4m3x2/.e5m2x2, which ptxas
# assembles from sm89 on: below it these launches do not compile, whatever the kernel does.
expect_compile_failure(_dot_scaled_kernel, match="requires .target sm_89",
                       reason="tl.dot_scaled's FP8 upcast (cvt .e4m3x2/.e5m2x2) needs sm89+ (ptxas)")

if not triton_at_least(3, 9):  # what Triton 3.6 refuses, seen compiling this kernel here (2026-12-04)
    expect_compile_failure(_dot_scaled_kernel, match="PassManager::run failed",
                           reason="Triton 3.6 refuses e2m1 packed along M (every target), NVFP4 scales on sm89, "
                                  "sm90 and sm100, bf16 x bf16 on sm120")


def _operand(g, fmt, shape):
    if fmt in ("bf16", "fp16"):
        return torch.randn(shape, generator=g).to(torch.bfloat16 if fmt == "bf16" else torch.float16)
    return torch.randint(0, 256, shape, generator=g, dtype=torch.int64).to(torch.uint8)  # every code


def _run(fa, fb, *, kpa=True, sa=True, sb=True, nvfp4=False, seed=0, num_warps=4):
    g = torch.Generator().manual_seed(seed)
    pa, pb = (2 if fa == "e2m1" else 1), (2 if fb == "e2m1" else 1)
    a = _operand(g, fa, (M, K // pa) if kpa else (M // pa, K))
    b = _operand(g, fb, (K // pb, N))
    group = 16 if nvfp4 else 32
    if nvfp4:
        s_a = torch.randint(0x30, 0x40, (M, K // group), generator=g, dtype=torch.int64).to(torch.uint8)
        s_b = torch.randint(0x30, 0x40, (N, K // group), generator=g, dtype=torch.int64).to(torch.uint8)
        s_a, s_b = s_a.view(torch.float8_e4m3fn), s_b.view(torch.float8_e4m3fn)
    else:
        s_a = torch.randint(120, 135, (M, K // group), generator=g, dtype=torch.int64).to(torch.uint8)
        s_b = torch.randint(120, 135, (N, K // group), generator=g, dtype=torch.int64).to(torch.uint8)
        s_a[0, 0], s_a[1, 0], s_b[2, 1] = 0, 255, 255  # the codes the two versions treat differently
    acc = torch.randn(M, N, generator=g)
    out = torch.empty(M, N)
    _dot_scaled_kernel[(1,)](a, s_a, b, s_b, acc, out, M=M, N=N, K=K, FA=fa, FB=fb, PA=pa, PB=pb, KPA=kpa, SA=sa,
                             SB=sb, G=group, num_warps=num_warps)
    from harness.tensor_cores import dot_scaled

    instr = "wgmma" if num_warps % 4 == 0 else "mma"  # M = 64: a warpgroup tile only on 4 or 8 warps
    want = dot_scaled(a, s_a if sa else None, fa, b, s_b if sb else None, fb, acc, a_k_pack=kpa, instr=instr)
    return out, want


def _bits_equal(x: torch.Tensor, y: torch.Tensor) -> bool:
    return bool(((x.view(torch.int32) == y.view(torch.int32)) | (x.isnan() & y.isnan())).all())


@pytest.mark.parametrize("fa,fb", [("e2m1", "e2m1"), ("e4m3", "e5m2"), ("e5m2", "e2m1"), ("e2m1", "fp16"),
                                   ("bf16", "e4m3"), ("bf16", "bf16")])
def test_interpreted_dot_scaled_is_the_model(fa, fb):
    out, want = _run(fa, fb)
    assert _bits_equal(out, want)
    assert bool(out[1].isnan().all()) and bool(out[:, 2].isnan().all())  # code 255: a's row 1, b's column 2


def test_a_tile_on_two_warps_is_the_mma_sync_model():
    """64 rows on 2 warps are no warpgroup: Triton gives the tile mma.sync, whose operand layout reorders k, so
    the shim must pick the instruction from the launch's num_warps as well as M (it once took M alone)."""
    from harness.tensor_cores import dot_scaled

    out, want = _run("e4m3", "bf16", num_warps=2, seed=3)
    assert _bits_equal(out, want)
    g = torch.Generator().manual_seed(3)
    a, b = _operand(g, "e4m3", (M, K)), _operand(g, "bf16", (K, N))
    s_a = torch.randint(120, 135, (M, K // 32), generator=g, dtype=torch.int64).to(torch.uint8)
    s_b = torch.randint(120, 135, (N, K // 32), generator=g, dtype=torch.int64).to(torch.uint8)
    s_a[0, 0], s_a[1, 0], s_b[2, 1] = 0, 255, 255
    acc = torch.randn(M, N, generator=g)
    assert _bits_equal(want, dot_scaled(a, s_a, "e4m3", b, s_b, "bf16", acc, instr="mma"))  # same inputs as _run
    assert not _bits_equal(out, dot_scaled(a, s_a, "e4m3", b, s_b, "bf16", acc, instr="wgmma"))


def test_unscaled_operands_are_the_model():
    out, want = _run("e2m1", "bf16", sb=False)
    assert _bits_equal(out, want)


def test_e2m1_packed_along_m_follows_the_compiler():
    if lowering_for().mn_packed:
        out, want = _run("e2m1", "e2m1", kpa=False)
        assert _bits_equal(out, want)
    else:
        with pytest.raises(Exception, match=r"packed along M/N"):
            _run("e2m1", "e2m1", kpa=False)


def test_nvfp4_scales_are_e4m3_or_refused_as_the_compiler_does():
    if lowering_for().e4m3_scales:
        out, want = _run("e2m1", "e2m1", nvfp4=True)
        assert _bits_equal(out, want)
        assert bool(torch.isfinite(out).all())  # read as e8m0, codes 0x30-0x3f would scale by 2^-79..2^-64
    else:
        with pytest.raises(Exception, match=r"NVFP4 tl.dot_scaled \(e4m3 scales\) does not compile for sm90"):
            _run("e2m1", "e2m1", nvfp4=True)


def test_the_shim_is_installed_for_the_session():
    from triton.runtime import interpreter as itp

    from harness.interp import scaled_dots

    assert scaled_dots.installed()
    assert getattr(itp.InterpreterBuilder.create_dot_scaled, scaled_dots.DECODES_SCALE_TYPES, False)
