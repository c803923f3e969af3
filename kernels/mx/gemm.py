"""``scaled_gemm``: C = A · Bᵀ for MXFP4 or NVFP4 operands (as ``quantize_fp4`` writes them) via ``tl.dot_scaled``.

A is (M, K) and B is (N, K), both packed along K with scales per block along K, linear or swizzled. C is fp32;
NVFP4 multiplies it by both global scales at the end. What ``tl.dot_scaled`` does with these operands depends on
the target and the Triton version (read from the PTX of each, ``tests/kernels/mx/test_mx_lowering.py``): native
block-scaled MMA on sm100 (``tcgen05.mma ... block_scale``) and sm120 (``mma.sync ... block_scale``), an emulation
through bf16 MMA elsewhere. Refused here, with the reason, rather than left to fail deep in the compiler:

* NVFP4 (ue4m3 scales) on sm89 and sm90 with Triton < 3.9: Triton 3.6 stops in ``TritonGPUAccelerateMatmul``
  ("PassManager::run failed", this kernel compiled for sm89 and sm90 on 2026-12-04; sm90 also on the H200), as it
  does wherever it emulates ``dot_scaled``; 3.9 emulates it. Versions between were not checked, so they are refused
  too. On sm100 and sm120 3.6 compiles this kernel's NVFP4 tiles on native block-scaled MMA.
* NVFP4 below sm89: its ue4m3 scales are FP8 e4m3, which Triton lowers from sm89 on.
* On the interpreter: Triton releases whose interpreter has no ``dot_scaled`` (3.6, unless a shim provides it;
  3.6's interpreter then still fails the K loop under NumPy 2 unless a shim also squeezes its scalar
  ``__index__``, as the harness's interpreter lane does);
  NVFP4 where the interpreter's ``dot_scaled`` reads every scale as e8m0 (3.9's own: an NVFP4 product would be
  silently wrong) unless a shim marks its method ``decodes_scale_types``; and NVFP4 before Triton 3.9 (the
  interpreter imitates sm90, whose compiler refuses it).
"""

from __future__ import annotations

import os
import re
from typing import Any

import torch
import triton
import triton.language as tl

from kernels._interpreter import runs_on_interpreter
from kernels._versions import triton_version
from kernels.mx import _checks
from kernels.mx.layout import BLOCK, cdiv, swizzled_size

__all__ = ["scaled_gemm", "gemm_refusal", "launch_config", "k_splits", "BM", "BN", "BK", "SPLIT_ALIGN"]

BM, BN, BK = 128, 128, 128
#: a split's K range is a multiple of this (every BK of launch_config divides it), so a split holds the same k
#: steps whatever the tile
SPLIT_ALIGN = 256
_SPLIT_ALIGN = tl.constexpr(SPLIT_ALIGN)
#: programs k_splits aims for (two per SM of a 132-SM H100, rounded down to a power of two; k_splits says why)
_SPLIT_PROGRAMS = 256


@triton.jit
def _scale_offsets(rows, cols, stride, scale_cols, SWIZZLED: tl.constexpr):
    r = rows.to(tl.int64)
    if SWIZZLED:
        tile = (r // 128)[:, None] * (scale_cols // 4) + (cols // 4)[None, :]
        return tile * 512 + ((r % 32) * 16 + (r % 128 // 32) * 4)[:, None] + (cols % 4)[None, :]
    return r[:, None] * stride + cols[None, :]


@triton.jit
def _scaled_gemm_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, ga_ptr, gb_ptr, M, N, K, stride_a, stride_b, stride_c,
                        stride_as, stride_bs, a_scale_cols, b_scale_cols, BM: tl.constexpr, BN: tl.constexpr,
                        BK: tl.constexpr, GROUP: tl.constexpr, NVFP4: tl.constexpr, SWIZZLED: tl.constexpr,
                        GROUP_M: tl.constexpr, A_FORMAT: tl.constexpr, AK: tl.constexpr, SPLIT: tl.constexpr):
    # A holds AK bytes of each BK-wide k step: BK // 2 for packed e2m1, BK for e4m3
    # GROUP_M row tiles walk the column tiles together, so the B tiles they share are read from L2, not HBM
    # SPLIT > 1: program (pid, s) sums split s's K range from zero into the s-th (M, N) plane of c (a workspace);
    # _split_sum_kernel adds the planes
    pid = tl.program_id(0)
    if SPLIT == 1:
        k_lo = 0
        k_hi = K
    else:
        tl.static_assert(_SPLIT_ALIGN % BK == 0)
        k_lo = tl.program_id(1) * (tl.cdiv(tl.cdiv(K, SPLIT), _SPLIT_ALIGN) * _SPLIT_ALIGN)
        k_hi = tl.minimum(k_lo + tl.cdiv(tl.cdiv(K, SPLIT), _SPLIT_ALIGN) * _SPLIT_ALIGN, K)
    per_group = GROUP_M * tl.cdiv(N, BN)
    first_m = pid // per_group * GROUP_M
    size_m = tl.minimum(tl.cdiv(M, BM) - first_m, GROUP_M)
    rm = (first_m + pid % per_group % size_m) * BM + tl.arange(0, BM)
    rn = (pid % per_group // size_m) * BN + tl.arange(0, BN)
    kk = tl.arange(0, BK // 2)
    ka = tl.arange(0, AK)
    ks = tl.arange(0, BK // GROUP)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(k_lo, k_hi, BK):
        kb = k0 // 2 + kk
        kab = k0 // (BK // AK) + ka
        a = tl.load(a_ptr + rm.to(tl.int64)[:, None] * stride_a + kab[None, :],
                    # harness: equivalent-mutant(other): a masked lane is a row past M (never stored) or a k past
                    # K, where b is 0 (the same k mask) and the scales finite, so it adds 0
                    mask=(rm[:, None] < M) & (kab[None, :] < K // (BK // AK)), other=0.0)
        b = tl.load(b_ptr + rn.to(tl.int64)[None, :] * stride_b + kb[:, None],
                    # harness: equivalent-mutant(other): a column past N is never stored; a k past K meets a = 0
                    mask=(rn[None, :] < N) & (kb[:, None] < K // 2), other=0)
        sc = k0 // GROUP + ks
        # other=0.0, not 0: a float zero converts to the scale pointer's type whatever it is (u8 bytes here; also
        # e4m3 scales passed as float8e4nv, which launch capture compiles: an int can't be cast to an FP8 type)
        sa = tl.load(as_ptr + _scale_offsets(rm, sc, stride_as, a_scale_cols, SWIZZLED),
                     # harness: equivalent-mutant(other): a masked scale is of a row past M (never stored) or a k
                     # past K, whose codes are 0, and 1.0 is a finite scale (u8 1: e8m0 2^-126, e4m3 2^-9)
                     mask=(rm[:, None] < M) & (sc[None, :] < K // GROUP), other=0.0)
        sb = tl.load(bs_ptr + _scale_offsets(rn, sc, stride_bs, b_scale_cols, SWIZZLED),
                     # harness: equivalent-mutant(other): a column past N (never stored) or a k past K (codes 0)
                     mask=(rn[:, None] < N) & (sc[None, :] < K // GROUP), other=0.0)
        if NVFP4:
            sa = sa.to(tl.float8e4nv, bitcast=True)
            sb = sb.to(tl.float8e4nv, bitcast=True)
        acc = tl.dot_scaled(a, sa, A_FORMAT, b, sb, "e2m1", acc)
    if NVFP4 and SPLIT == 1:
        # harness: equivalent-mutant(drop-f32): the global scales are float32 (kernels.mx._checks.global_scale)
        acc = acc * (tl.load(ga_ptr).to(tl.float32) * tl.load(gb_ptr).to(tl.float32))
    if SPLIT > 1:
        c_ptr += tl.program_id(1).to(tl.int64) * M * stride_c
    tl.store(c_ptr + rm.to(tl.int64)[:, None] * stride_c + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _split_sum_kernel(w_ptr, c_ptr, ga_ptr, gb_ptr, M, N, stride_c, SPLIT: tl.constexpr, NVFP4: tl.constexpr,
                      BLOCK_E: tl.constexpr):
    # c = ((w[0] + w[1]) + w[2]) + ...: the planes in split order, one fp32 add at a time, the same on every run
    offs = tl.program_id(0).to(tl.int64) * BLOCK_E + tl.arange(0, BLOCK_E)
    mask = offs < M * N
    acc = tl.load(w_ptr + offs, mask=mask)
    for s in tl.static_range(1, SPLIT):
        acc += tl.load(w_ptr + s * M * N + offs, mask=mask)
    if NVFP4:
        # harness: equivalent-mutant(drop-f32): the global scales are float32 (kernels.mx._checks.global_scale)
        acc = acc * (tl.load(ga_ptr).to(tl.float32) * tl.load(gb_ptr).to(tl.float32))
    tl.store(c_ptr + offs // N * stride_c + offs % N, acc, mask=mask)


def k_splits(M: int, N: int, K: int) -> int:
    """How many K ranges ``scaled_gemm`` sums separately for this shape (1: none), the same on every target.

    The split is part of the product's definition, not of its speed alone: split s sums K[s·KS, (s+1)·KS) from
    zero (KS = K / splits rounded up to a multiple of :data:`SPLIT_ALIGN`), and C is then the fp32 sum of the
    splits in order, ((C₀ + C₁) + C₂) + …, which rounds differently from one K walk. So it depends on the shape
    alone, never on the GPU or the tile, and the interpreter lane splits exactly as a GPU does.

    The rule: enough splits for :data:`_SPLIT_PROGRAMS` programs of 16 x 64 output tiles (a power of two), each
    range at least 1024 long. Why: the sm90 skinny tile (16 x 64 x 256 on 4 warps, :func:`launch_config`) takes
    255 registers a thread (``cuobjdump --dump-resource-usage`` of Triton 3.6's sm90 build, 2026-12-06), so an SM
    holds two such programs: 256 are two on each of an H100's 132 SMs, less 8. Unsplit, 16 x 4096 x 4096
    launches 64 programs and 16 x 8192 x 8192 128, each walking all of K with one warp per scheduler. Derived from
    that compiler output, not timed: the H100 sweep (``bench_mx.py --sweep-gemm``) got no device in the round
    that added the split."""
    tiles = cdiv(M, 16) * cdiv(N, 64)
    splits = 1
    while tiles * splits < _SPLIT_PROGRAMS and K // (2 * splits) >= 1024:
        splits *= 2
    return splits if M * N * splits < 2**31 else 1


def launch_config(M: int, N: int, K: int, capability: tuple[int, int] | None = None) -> tuple[int, ...]:
    """(BM, BN, BK, GROUP_M, num_warps, num_stages) of a launch of this shape on a GPU of ``capability``.

    sm80-sm90 (``tl.dot_scaled`` emulated): the fastest of a sweep on an H100 (Triton 3.6, 2026-12-06,
    ``docs/performance.md``); for 64 < M <= 256 the 64-row tile with BK 128, which took 0.69x / 0.48x the time of BK
    256 at 256 x 4096 x 4096 / 256 x 8192 x 8192 on an H200 (``bench_mx.py --sweep-gemm``, Triton 3.6, 2026-12-06).
    Tiles of one height give the same bits (the emulation accumulates K in order, whatever K step holds it;
    ``test_a_tiles_k_step_leaves_the_bits``); the height picks the MMA, and so the bits: a 16 x 80 x 1024 MXFP4
    product computed by the interpreter with the 128-row tile differs from the H100's 16-row launch at 1,037 of
    1,280 outputs, and with the 16-row tile at none (``scripts/check_split_k.py``, 2026-12-06). So the interpreter,
    which imitates sm90, takes sm90's tiles (:func:`scaled_gemm`). Skinny M (decode, MoE) reads the weights once per
    row tile, so its tiles are 16 rows and many columns' programs share the bandwidth. sm100 and newer: one 128 x
    128 x 128 tile on 4 warps, the shape native block-scaled MMA takes (a tile of fewer than 128 rows falls back to
    the emulation there). How many K ranges a launch sums apart is not the tile's to choose: it changes the bits, so
    :func:`k_splits` decides it from the shape alone; every BK here divides :data:`SPLIT_ALIGN`."""
    if capability is None or capability >= (10, 0):
        return BM, BN, BK, 1, 4, 3
    if M <= 16 or (M <= 64 and N <= 4096):
        return 16, 64, 256, 1, 4, 4
    if M <= 64:
        return 16, 128, 256, 1, 4, 4
    if M <= 256:
        return 64, 128, 128, 1, 4, 4
    return BM, 2 * BN, BK, 8, 8, 3


def _imitated_capability() -> tuple[int, int]:
    """The capability whose tiles the interpreter takes: the arch the harness's ``tl.dot_scaled`` model computes,
    which it names in ``HARNESS_INTERP_ARCH`` (``sm100`` under ``--harness-arch=sm100``), else sm90 (the
    harness's default models, and the arch ``gemm_refusal`` holds Triton's own interpreter to)."""
    m = re.fullmatch(r"sm(\d+)(\d)", os.environ.get("HARNESS_INTERP_ARCH", ""))
    return (int(m.group(1)), int(m.group(2))) if m else (9, 0)


def gemm_refusal(scheme: str, *, interpreter: bool, capability: tuple[int, int] | None,
                 version: tuple[int, int] | None = None, a_format: str = "e2m1") -> str | None:
    """Why ``scaled_gemm`` refuses ``scheme`` (with A in ``a_format``) here (module docstring), or None when it
    runs."""
    v = triton_version() if version is None else version
    vs = f"{v[0]}.{v[1]}"
    if interpreter:
        from triton.runtime import interpreter as interp

        if not hasattr(interp.InterpreterBuilder, "create_dot_scaled"):
            return f"the Triton {vs} interpreter has no tl.dot_scaled"
        # seen 2026-12-04 with Triton 3.6.0 and NumPy 2.4 (a shim had provided dot_scaled); a shim (the harness's
        # interp.jit.fix_scalar_index) may mark the launch patch as squeezing the array first, as 3.9 does
        if v < (3, 7) and not getattr(getattr(interp, "_patch_lang_tensor", None), "squeezes_scalar_index", False):
            return (f"the Triton {vs} interpreter cannot run the K loop (range over a runtime int: its __index__ "
                    f"takes int() of a 1-element array, which NumPy 2 refuses)")
        # a shim (the harness's interp.scaled_dots) may mark its dot_scaled as decoding each scale by its type
        decodes = getattr(interp.InterpreterBuilder.create_dot_scaled, "decodes_scale_types", False)
        if scheme == "nvfp4" and not decodes:
            return (f"the Triton {vs} interpreter decodes every tl.dot_scaled scale as e8m0, so NVFP4's ue4m3 scales "
                    f"would give a wrong product; run it on a GPU")
        if scheme == "nvfp4" and v < (3, 9):
            return (f"the Triton {vs} interpreter imitates sm90, where NVFP4 tl.dot_scaled fails to compile (Triton "
                    f"3.6: PassManager::run failed in TritonGPUAccelerateMatmul; 3.9 emulates it)")
        return None
    if capability is None:
        return "no GPU capability"
    if capability < (8, 0):
        return f"sm{capability[0]}{capability[1]}: Triton supports tl.dot_scaled on sm80 and newer"
    if a_format == "e4m3" and capability < (8, 9):
        return f"sm{capability[0]}{capability[1]}: e4m3 operands are FP8, which Triton lowers from sm89 on"
    if scheme == "nvfp4" and capability < (8, 9):
        return f"sm{capability[0]}{capability[1]}: NVFP4's ue4m3 scales are FP8 e4m3, which Triton lowers from sm89 on"
    if scheme == "nvfp4" and (8, 9) <= capability < (10, 0) and v < (3, 9):
        return (f"sm{capability[0]}{capability[1]} with Triton {vs}: NVFP4 tl.dot_scaled fails to compile (Triton 3.6: "
                f"PassManager::run failed in TritonGPUAccelerateMatmul; 3.9 emulates it)")
    return None


def scaled_gemm(a: Any, b: Any, scheme: str = "mxfp4", *, layout: str = "linear", a_format: str = "e2m1",
                out: torch.Tensor | None = None) -> torch.Tensor:
    """C (M, N) fp32 = A (M, K) · B (N, K)ᵀ for ``quantize_fp4`` outputs ``a`` and ``b`` of ``scheme`` whose scales
    are in ``layout``. ``a_format="e4m3"`` (with ``scheme="mxfp4"``) takes A as MXFP8 instead: (codes (M, K)
    ``torch.float8_e4m3fn``, e8m0 scales per 32 along K as ``torch.uint8``, in ``layout``), the e4m3 x e2m1
    product of FP8 activations and FP4 weights. Raises ``NotImplementedError`` naming the reason where this
    target, Triton or interpreter cannot run it (:func:`gemm_refusal`), ``ValueError``/``TypeError`` naming the
    argument for bad operands."""
    _checks.scheme_rule(scheme, None if scheme == "nvfp4" else "floor")
    if layout not in ("linear", "swizzled"):
        raise ValueError(f"layout: expected 'linear' or 'swizzled'; got {layout!r}")
    if a_format not in ("e2m1", "e4m3"):
        raise ValueError(f"a_format: expected 'e2m1' (FP4 A) or 'e4m3' (MXFP8 A); got {a_format!r}")
    if a_format == "e4m3" and scheme != "mxfp4":
        raise ValueError(f"a_format: 'e4m3' (MXFP8 A, e8m0 scales per 32) pairs with scheme 'mxfp4' only; got "
                         f"scheme {scheme!r}")
    qa = _checks.operand("a", a, scheme, fp8=a_format == "e4m3")
    qb = _checks.operand("b", b, scheme, qa[0].device)
    (M, ka), (N, kh_b) = qa[0].shape, qb[0].shape
    K = ka if a_format == "e4m3" else 2 * ka
    if K != 2 * kh_b:
        raise ValueError(f"b: K = {2 * kh_b} but a has K = {K} (FP4 codes are packed two per byte)")
    group = BLOCK[scheme]
    if K % group:
        raise ValueError(f"a: K = {K} is not a multiple of the {scheme} block ({group})")
    cols = K // group
    for name, q, rows in (("a", qa, M), ("b", qb, N)):
        want = (rows, cols) if layout == "linear" else (swizzled_size(rows, cols)[0] * swizzled_size(rows, cols)[1],)
        if tuple(q[1].shape) != want:
            raise ValueError(f"{name}: its {layout} scales must have shape {want}; got {tuple(q[1].shape)}")
        if layout == "linear" and cols > 1 and q[1].stride(1) != 1:
            raise ValueError(f"{name}: its scales need unit stride along K; got strides {tuple(q[1].stride())}")
        if layout == "swizzled" and not q[1].is_contiguous():
            raise ValueError(f"{name}: its swizzled scales must be contiguous")
    device = qa[0].device
    if out is not None and (not isinstance(out, torch.Tensor) or out.dtype != torch.float32
                            or tuple(out.shape) != (M, N) or out.device != device
                            or (N > 1 and out.stride(1) != 1)):
        got = f"{out.dtype} {tuple(out.shape)} on {out.device}" if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"out: expected a float32 ({M}, {N}) tensor on {device} with unit stride along N; got {got}")
    # every argument is checked before the refusal: a bad call is named as such wherever it runs
    interp = runs_on_interpreter(_scaled_gemm_kernel)
    cap = None if interp or device.type != "cuda" else torch.cuda.get_device_capability(device)
    # on the interpreter: the imitated arch's tiles, whose row height decides the bits (launch_config)
    tile_cap = _imitated_capability() if interp else cap
    why = gemm_refusal(scheme, interpreter=interp, capability=cap, a_format=a_format)
    if why is not None:
        raise NotImplementedError(f"scaled_gemm({scheme}{', a_format=e4m3' if a_format == 'e4m3' else ''}): {why}")
    if out is None:
        out = torch.empty((M, N), dtype=torch.float32, device=device)
    if M and N:
        if K == 0:
            out.zero_()
            return out
        _launch(qa, qb, out, scheme, layout, a_format, launch_config(M, N, K, tile_cap), k_splits(M, N, K))
    return out


def _launch(qa: tuple, qb: tuple, out: torch.Tensor, scheme: str, layout: str, a_format: str,
            config: tuple[int, ...], splits: int) -> None:
    """The checked operands' product into ``out`` with a tile ``config`` of :func:`launch_config` and
    ``splits`` K ranges (:func:`k_splits`; a sweep may pass others: the tile never changes the bits on sm90, the
    split does)."""
    (M, N), K = out.shape, qb[0].shape[1] * 2
    group = BLOCK[scheme]
    cols = K // group
    nvfp4 = scheme == "nvfp4"
    g_a = qa[2].reshape(1) if nvfp4 else out
    g_b = qb[2].reshape(1) if nvfp4 else out
    s_a = 0 if layout == "swizzled" else qa[1].stride(0)
    s_b = 0 if layout == "swizzled" else qb[1].stride(0)
    bm, bn, bk, group_m, warps, stages = config
    c = out if splits == 1 else torch.empty((splits, M, N), dtype=torch.float32, device=out.device)
    _scaled_gemm_kernel[(cdiv(M, bm) * cdiv(N, bn), splits)](
        qa[0], qa[1], qb[0], qb[1], c, g_a, g_b, M, N, K, qa[0].stride(0), qb[0].stride(0), c.stride(-2),
        s_a, s_b, cdiv(cols, 4) * 4, cdiv(cols, 4) * 4, BM=bm, BN=bn, BK=bk, GROUP=group,
        NVFP4=nvfp4, SWIZZLED=layout == "swizzled", GROUP_M=group_m, A_FORMAT=a_format,
        AK=bk if a_format == "e4m3" else bk // 2, SPLIT=splits, num_warps=warps, num_stages=stages)
    if splits > 1:
        block = 1024
        _split_sum_kernel[(cdiv(M * N, block),)](c, out, g_a, g_b, M, N, out.stride(0), SPLIT=splits, NVFP4=nvfp4,
                                                 BLOCK_E=block, num_warps=4)
