"""The evaluator: ``tl.dot`` as the rows of :mod:`.models` say the tensor cores compute it.

A tensor-core instruction computes ``d = sum_{i < n} a_i * b_i + c`` for a block of ``n`` products (the
instruction's k) in one step, and a length-K dot chains the blocks in k order, feeding each result back as ``c``.
One step (Fasi, Higham, Mikaitis & Pranesh 2021; Khattak & Mikaitis, arXiv 2512.07004, whose FP8 form
``mmaemu`` implements):

- the products are exact; input exponents are clamped at the format's emin (subnormals keep a denormalised
  significand); zero products take no part in the maximum;
- every product and ``c`` is aligned to the block's largest exponent ``E`` (clamped below at ``min_exp``) and
  truncated toward zero to ``frac`` fraction bits below ``2^E`` (``frac`` = 23 + the extra alignment bits);
- the aligned terms are summed exactly; the sum is truncated to ``frac_out`` fraction bits of its own exponent
  (fp32 subnormals below 2^-126); a zero result is +0.

Each fact is a row of :data:`MODELS` with its source: ``measured`` (H200 outputs of plain Triton kernels, bit for
bit) or ``published`` ("published, not measured here"). Everything is evaluated exactly in float64 torch, so the
result does not depend on the machine.

What Triton wraps around the instruction is modelled from its lowering (PTX of Triton 3.6 and 3.9 for sm90):

- FP8 with ``max_num_imprecise_acc`` <= the tile's K: runs of ``ceil(max / 32)`` wgmma instructions start from
  zero and are added to the fp32 accumulator with ``add.f32`` (round to nearest even); the default on sm90 is
  2^30 (never);
- ``input_precision="tf32"`` feeds the fp32 bit patterns to the tf32 instruction (no conversion: the hardware
  reads the top 19 bits); ``"tf32x3"`` is ``big = cvt.rna.tf32(x)``, ``small = x - big``, then
  ``dot(a_small, b_big, 0)``, ``dot(a_big, b_small, ...)``, NaNs of that replaced by 0, ``dot(a_big, b_big, ...)``,
  and only then ``add.f32`` to the accumulator (TTGIR of Triton 3.6 and 3.9 for sm90; H200: bit for bit);
  ``"ieee"`` is one ``fma.rn.f32`` per k, in k order (the FMA dot);
- small tiles (M < 64 per warpgroup, or ``num_warps`` not a multiple of 4) get ``mma.sync`` instead of ``wgmma``
  (``instr="mma"``): FP8 operands are then converted to fp16 (exact) and run through the fp16 instruction in the
  k order of their kWidth=4 operand layout, two k16 instructions per 32-k span taking alternate pairs of k
  (:func:`mma_k_order`). The same conversion and order give e5m2 on sm80-sm87 (every tile) and FP8 under mma.sync
  on sm100 (read from their TTGIR/PTX, Triton 3.6 and 3.9; :func:`harness.tensor_cores.models.fp8_model` says which
  FP8 dot runs where, and what is refused).

FP8 on an FP8 instruction (sm90 ``wgmma``, sm89 mma.sync m16n8k32) runs the :data:`MODELS` row of mmaemu's
"hopper" / "ada" preset: finite operands and accumulators through :mod:`.fast`, inf/NaN codes or accumulators and
fp32 overflow through mmaemu's own chain (the oracle :mod:`.fast` is tested against).
"""

from __future__ import annotations

import torch

from harness.names import names
from harness.tensor_cores import fast
from harness.tensor_cores.models import EMIN, MODELS, BlockFMA, _cc, fp8_model, model_for

__all__ = ["dot", "mma_k_order"]

_FP8 = {names(n).torch_dtype: names(n).spec for n in ("e4nv", "e5m2")}  # torch dtype -> the models' name
_NEG = -100000.0


def _kind(dt: torch.dtype) -> str:
    try:
        return names(dt).spec
    except ValueError:
        return str(dt)


# --- exact helpers (float64) ----------------------------------------------------------------------------------

def _exp(x: torch.Tensor, emin: float | None = None) -> torch.Tensor:
    """floor(log2|x|) (clamped below at emin) for x != 0; _NEG for 0. frexp is exact."""
    e = (torch.frexp(x)[1] - 1).to(torch.float64)
    if emin is not None:
        e = e.clamp_min(emin)
    return torch.where(x != 0, e, torch.full_like(e, _NEG))


def _pow2(e: torch.Tensor) -> torch.Tensor:
    return ((e.to(torch.int64) + 1023) << 52).view(torch.float64)


def _trunc(x: torch.Tensor) -> torch.Tensor:
    """trunc(x), toward zero. Why not ``torch.trunc``: on torch 2.13's CPU build it is slow for values of the size
    the block sums hold (measured 2026-12-04, 16k float64: 8 ms at |x| ~ 2^25, 11 us below 4), the hot path of every
    modelled dot; ``div``'s "trunc" rounding mode gives the same values in microseconds."""
    return torch.div(x, 1.0, rounding_mode="trunc")


def _truncate(d: torch.Tensor, bits: int) -> torch.Tensor:
    """d truncated toward zero to ``bits`` fraction bits of its own exponent (fp32 grid below 2^-126); +0 for 0."""
    ed = _exp(d).clamp_min(-126)
    out = _trunc(d * _pow2(bits - ed)) * _pow2(ed - bits)
    return torch.where(d != 0, out, torch.zeros_like(d))


def _tf32_rz(x: torch.Tensor) -> torch.Tensor:
    """fp32 -> the tf32 the instruction reads: the top 19 bits (truncation); float64 out."""
    return (x.float().view(torch.int32) & -8192).view(torch.float32).double()


def _tf32_rna(x: torch.Tensor) -> torch.Tensor:
    """cvt.rna.tf32.f32: round to 10 fraction bits, ties away from zero (fp32 bits out; finite inputs)."""
    i = x.float().view(torch.int32)
    r = ((i + 0x1000) & -8192)
    return torch.where(torch.isfinite(x.float()), r, i).view(torch.float32)


# --- the chain ------------------------------------------------------------------------------------------------

def _chain(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, p: BlockFMA, emin_a: int, emin_b: int) -> torch.Tensor:
    """A [..., M, K], B [..., K, N] float64 operand values (inf/NaN allowed), C [..., M, N] float64 (fp32 values,
    inf/NaN allowed): the chain of block steps over k, float64 holding fp32 values. Leading batch dims are
    elementwise: each output's chain depends only on its row, its column and its accumulator.

    Non-finite values follow IEEE one block at a time, which is what the H200 does (measured: the capture's
    special-value cases): a block whose ``c`` or products hold inf/NaN gives the IEEE sum of just those (inf - inf
    and inf * 0 are NaN); a finite block whose result overflows fp32 gives +-inf, and that inf meets the later
    blocks' infinities, so huge * 1.5 in one block and -inf in a later one is NaN, where one float64 sum over all k
    would say -inf."""
    K = A.shape[-1]
    fa, fb = torch.isfinite(A), torch.isfinite(B)
    A0, B0 = torch.where(fa, A, 0.0), torch.where(fb, B, 0.0)
    ea_all, eb_all = _exp(A0, emin_a), _exp(B0.transpose(-1, -2), emin_b)
    specials = not (bool(fa.all()) and bool(fb.all()))
    acc = C
    for k0 in range(0, K, p.nfma):
        a, b = A0[..., k0:k0 + p.nfma], B0[..., k0:k0 + p.nfma, :].transpose(-1, -2)
        prod = a[..., :, None, :] * b[..., None, :, :]
        # a zero operand's exponent is _NEG, so a zero product's sum stays below min_exp: it never sets the max
        # (products of these formats' finite values never underflow float64, so prod == 0 iff an operand is 0)
        ep = ea_all[..., :, None, k0:k0 + p.nfma] + eb_all[..., None, :, k0:k0 + p.nfma]
        fin = torch.isfinite(acc)
        c = torch.where(fin, acc, torch.zeros_like(acc))
        E = torch.maximum(ep.amax(-1), _exp(c)).clamp_min(p.min_exp)
        q = _pow2(E - p.frac)  # the alignment step; dividing by a power of two is exact, then truncation
        s = torch.div(prod, q[..., None], rounding_mode="trunc").sum(-1) + torch.div(c, q, rounding_mode="trunc")
        d = _truncate(s * q, p.frac_out)
        d = d.float().double()  # the accumulator is fp32 between instructions: overflow is inf
        if not specials and bool(fin.all()):
            acc = d
            continue
        special = ~fin
        ieee = torch.where(fin, torch.zeros_like(acc), acc)
        if specials:
            raw = A[..., :, None, k0:k0 + p.nfma] * B[..., k0:k0 + p.nfma, :].transpose(-1, -2)[..., None, :, :]
            nonfinite = ~torch.isfinite(raw)
            special = special | nonfinite.any(-1)
            ieee = ieee + torch.where(nonfinite, raw, torch.zeros_like(raw)).sum(-1)
        acc = torch.where(special, ieee, d)
    return acc


def _block_chain(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, p: BlockFMA, emin_a: int,
                 emin_b: int) -> torch.Tensor:
    """:func:`_chain`'s numbers: through :func:`.fast.chain` (bit for bit the same, several times faster) where
    that is exact, else :func:`_chain` itself (inf/NaN, fp32 overflow, bf16/tf32 exponents beyond fp32 products)."""
    out = fast.chain(A, B, C, p, emin_a, emin_b)
    return _chain(A, B, C, p, emin_a, emin_b) if out is None else out.double()


def _ieee_naive(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """sum_k A*B elementwise in float64 (never a BLAS, which may skip inf * 0): the IEEE class of the result."""
    return (A[:, :, None] * B[None, :, :]).sum(1)


def _fma_f32(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """fma.rn.f32 on float64 tensors holding fp32 values: the product is exact in float64, the sum rounded to odd
    in float64 (so the final rounding to fp32 is correct)."""
    p = a * b
    s = p + c
    bp = s - c
    err = (p - bp) + (c - (s - bp))  # TwoSum
    odd = (s.view(torch.int64) & 1) == 1
    fix = (err != 0) & ~odd & torch.isfinite(s) & (s != 0)
    toward = torch.where(err > 0, torch.full_like(s, float("inf")), torch.full_like(s, float("-inf")))
    s = torch.where(fix, torch.nextafter(s, toward), s)
    return s.float().double()


def _fma_dot(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    acc = C
    for k in range(A.shape[-1]):
        acc = _fma_f32(A[..., k:k + 1], B[..., k:k + 1, :], acc)
    return acc


#: the MODELS row of each mmaemu preset the FP8 path runs (the same numbers: nfma, frac, frac_out, min_exp, c early)
_PRESET_ROWS = {"hopper": ("sm90", "fp8", "wgmma"), "ada": ("sm89", "fp8", "mma")}


def _fp8_mmaemu(a: torch.Tensor, b: torch.Tensor, C: torch.Tensor, preset: str) -> torch.Tensor:
    """mmaemu's chain for FP8 a [M, K], b [K, N] (torch float8 dtypes), C fp32-valued float64 [M, N]: finite
    operands and accumulator through :func:`.fast.chain` on the preset's row (tests/harness/tensor_cores check it
    against mmaemu's own chain bit for bit), the rest (inf/NaN codes or accumulators, overflow) through mmaemu."""
    from mmaemu.model import chain, specials

    fa, fb = _FP8[a.dtype], _FP8[b.dtype]
    out = fast.chain(a.float(), b.float(), C, MODELS[_PRESET_ROWS[preset]], EMIN[fa], EMIN[fb])
    if out is not None:
        return out.double()
    a_u8 = a.contiguous().view(torch.uint8)
    b_u8 = b.T.contiguous().view(torch.uint8)
    a_s, _ = specials.sanitize(a_u8, fa)
    b_s, _ = specials.sanitize(b_u8, fb)
    finite_c = torch.isfinite(C)
    if not bool((C != 0).any()) and a.shape[1] % 16 == 0:
        out = chain.chain_gemm(a_s, b_s, fmt_a=fa, fmt_b=fb, preset=preset)
    else:
        av = a_s.view(a.dtype)[:, None, :].expand(a.shape[0], b.shape[1], a.shape[1])
        bv = b_s.view(b.dtype)[None, :, :].expand(a.shape[0], b.shape[1], a.shape[1])
        out = chain.dot(av, bv, torch.where(finite_c, C, 0.0).float(), preset=preset)
    out = specials.nonfinite_patch(out, a_u8, b_u8, fa, fb).double()
    if not bool(finite_c.all()):  # an inf/NaN accumulator: IEEE
        out = torch.where(finite_c, out, C + _ieee_naive(a.double(), b.double()))
    return out


def _native_fp8(a, b, C, arch, max_num_imprecise_acc) -> torch.Tensor:
    """FP8 on an FP8 instruction (sm90 wgmma: "hopper", with Triton's max_num_imprecise_acc runs; sm89 mma.sync
    m16n8k32: "ada")."""
    preset = "hopper" if arch == "sm90" else "ada"
    K = a.shape[1]
    m = max_num_imprecise_acc
    if arch != "sm90" or m is None or m > K:
        return _fp8_mmaemu(a, b, C, preset)
    # Triton's partial accumulator: runs of wgmma from zero, each added to the fp32 accumulator (add.f32)
    step = 32 * max(1, -(-m // 32))
    acc = C
    zero = torch.zeros_like(C)
    for k0 in range(0, K, step):
        part = _fp8_mmaemu(a[:, k0:k0 + step], b[k0:k0 + step], zero, preset)
        acc = (acc.float() + part.float()).double()
    return acc


def dot(a: torch.Tensor, b: torch.Tensor, acc: torch.Tensor | None = None, *, arch: str,
        out_dtype: torch.dtype = torch.float32, input_precision: str | None = None,
        max_num_imprecise_acc: int | None = None, instr: str = "wgmma") -> torch.Tensor:
    """``tl.dot(a, b, acc)`` as the tensor cores of ``arch`` compute it for one tile: a [M, K], b [K, N]
    (fp16, bf16, fp32, float8_e4m3fn / float8_e5m2, mixed FP8 pairs), acc fp32 [M, N] or None. Returns fp32.
    A batch dim in front (a [P, M, K], b [P, K, N], acc [P, M, N]) gives P independent tiles; why: a caller that
    needs a few scattered outputs of many tiles (one row of a, one column of b each) evaluates them in one call
    instead of P (FP8 on an FP8 instruction still runs one tile at a time).

    ``input_precision`` (fp32 operands): "tf32" (default), "tf32x3", "ieee". ``max_num_imprecise_acc``: as
    ``tl.dot``'s (FP8 on sm90; None = Triton's default there, never promote). ``instr``: "wgmma" (what Triton
    emits for warpgroup tiles on sm90; sm100's are ``tcgen05.mma``, also named "tcgen05": the published model
    of :mod:`.tcgen05`, ``max_num_imprecise_acc`` ignored) or "mma" (mma.sync: small tiles, other archs). FP8
    operands off tcgen05 run where :func:`.models.fp8_model` says: on an FP8 instruction (the "hopper" / "ada"
    rows, finite values through :mod:`.fast`, the rest through mmaemu) or converted to fp16 (sm80-sm87, and
    mma.sync tiles on sm90/sm100).
    Raises :class:`.models.DotRefused` (a ``NotImplementedError``) where the target's compiler refuses the operands
    (e4m3 below sm89), NotImplementedError for a combination no row of :data:`MODELS` covers (fp16 accumulators,
    int8...).
    """
    return _canonical_nan(_dot(a, b, acc, arch=arch, out_dtype=out_dtype, input_precision=input_precision,
                               max_num_imprecise_acc=max_num_imprecise_acc, instr=instr))


#: The word a tensor-core dot writes for every NaN output, whatever NaNs went in. Measured on an H100 (sm90,
#: Triton 3.6.0): all 236 generated ``tl.dot`` kernels with NaN outputs (mma.sync tiles of fp16, bf16, tf32,
#: e4m3 and e5m2 operands, fp32 and ieee chains too) wrote 0x7fffffff, converted to 0x7fff when stored as
#: fp16/bf16 (``python -m harness fuzz --gpu``, seeds 47000-49999); every NaN of the H200's wgmma tiles in
#: ``golden/test_dot_h200`` is this word too. tcgen05 publishes it (:data:`.tcgen05.NAN_WORD`). Archs before sm90
#: are given the same word, not measured here.
NAN_WORD = 0x7FFFFFFF


def _canonical_nan(out: torch.Tensor) -> torch.Tensor:
    nan = torch.isnan(out)
    if not bool(nan.any()):
        return out
    return torch.where(nan, torch.tensor(NAN_WORD, dtype=torch.int32).view(torch.float32), out)


def _dot(a: torch.Tensor, b: torch.Tensor, acc: torch.Tensor | None, *, arch: str, out_dtype: torch.dtype,
         input_precision: str | None, max_num_imprecise_acc: int | None, instr: str) -> torch.Tensor:
    if out_dtype != torch.float32:
        raise NotImplementedError("harness.tensor_cores.dot models fp32 accumulators only")
    if a.dim() not in (2, 3) or b.dim() != a.dim() or a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[-2]:
        raise ValueError(f"expected a [M, K] and b [K, N] (or [P, M, K] and [P, K, N]), got {tuple(a.shape)} and "
                         f"{tuple(b.shape)}")
    ka, kb = _kind(a.dtype), _kind(b.dtype)
    shape = (*a.shape[:-1], b.shape[-1])
    if acc is not None and tuple(acc.shape) != shape:
        raise ValueError(f"acc: expected shape {shape} (or None); got {tuple(acc.shape)}")
    C = torch.zeros(shape, dtype=torch.float64) if acc is None else acc.to(torch.float32).double()
    if instr in ("wgmma", "tcgen05") and 100 <= (_cc(arch) or 0) < 120 and \
            not (ka == kb == "fp32" and input_precision == "ieee"):
        from harness.tensor_cores import tcgen05

        tcgen05.check_arch(arch)
        if ka == "fp32" and (input_precision or "tf32") not in ("tf32", "tf32x3"):
            raise NotImplementedError(f"input_precision={input_precision!r} is not modelled")
        if ka not in ("fp16", "bf16", "fp32", "e4m3", "e5m2") or kb not in ("fp16", "bf16", "fp32", "e4m3", "e5m2"):
            raise NotImplementedError(f"harness.tensor_cores.dot: {ka} x {kb} operands are not modelled")
        return tcgen05.plain_dot(a, b, C, input_precision)
    if ka in ("e4m3", "e5m2") and kb in ("e4m3", "e5m2"):
        p, upcast = fp8_model(arch, ka, kb, instr)  # refuses what the compiler refuses, and arches without a model
        if not upcast:
            if a.dim() == 3:
                return torch.stack([_native_fp8(a[i], b[i], C[i], arch, max_num_imprecise_acc)
                                    for i in range(a.shape[0])]).float()
            return _native_fp8(a, b, C, arch, max_num_imprecise_acc).float()
        # Triton converts the operands to fp16 (exact) for mma.sync m16n8k16, in kWidth=4 dot operand layouts,
        # which deal each 32-k span's pairs alternately to the span's two instructions
        order = mma_k_order(a.shape[-1], 4, "FP8 under mma.sync")
        A, B = a[..., order].float().double(), b[..., order, :].float().double()
        return _block_chain(A, B, C, p, EMIN["fp16"], EMIN["fp16"]).float()
    if ka != kb:
        raise NotImplementedError(f"harness.tensor_cores.dot: mixed operands {ka} x {kb} are not modelled")
    if ka == "fp32":
        ip = input_precision or "tf32"
        A, B = a.float().double(), b.float().double()
        if ip == "ieee":
            out = fast.fma_dot(A, B, C)
            return _fma_dot(A, B, C).float() if out is None else out
        p = model_for(arch, "tf32", instr)
        if ip == "tf32":
            return _block_chain(_tf32_rz(A), _tf32_rz(B), C, p, -126, -126).float()
        if ip == "tf32x3":
            return _tf32x3(A, B, C, p).float()
        raise NotImplementedError(f"input_precision={ip!r} is not modelled")
    if ka not in ("fp16", "bf16"):
        raise NotImplementedError(f"harness.tensor_cores.dot: {ka} operands are not modelled")
    p = model_for(arch, ka, instr)
    A, B = a.float().double(), b.float().double()
    return _block_chain(A, B, C, p, EMIN[ka], EMIN[ka]).float()


def mma_k_order(K: int, kwidth: int, what: str = "mma.sync") -> torch.Tensor:
    """The k index each position of the mma.sync m16n8k16 chain reads, for operands in a ``dot_op`` layout of
    ``kwidth`` (``what`` names the caller's case in the error for a K the order is not derived for).

    Why: in that layout (its linear layout, ``to_linear_layout`` of Triton 3.9, for kWidth 2, 4, 8) lane ``t`` of a
    quad holds ``kwidth`` consecutive k values at ``t * kwidth``, and the same again ``4 * kwidth`` further on, so a
    span of ``8 * kwidth`` k feeds ``kwidth / 2`` instructions, which take the pairs of each run in turn:
    instruction ``i`` reads at its k slots ``2t, 2t+1`` the k values ``t * kwidth + 2i (+1)`` and at ``8 + 2t, 9 + 2t``
    those ``4 * kwidth`` further on. kWidth 2 is the plain order. kWidth 4 is what Triton 3.6 and 3.9 give 8-bit
    operands converted to fp16 (TTGIR: ``local_load`` to ``dot_op<{parent = #mma v2, kWidth = 4}>``, ``tt.fp_to_fp``
    to f16, ``tt.dot``) and FP8 operands or scales of ``dot_scaled`` before sm90; it reproduces all eight FP8
    mma.sync cases of the H200 capture (4 pairs x {16x64 w4, 64x64 w2}) bit for bit, the plain k order 88.7% of
    outputs. kWidth 8: e2m1 in ``dot_scaled``. An instruction's slots 0-7 and 8-15 are the A100 model's two blocks of
    8 (the published model's vectors fill an instruction's k from slot 0), so the sm80 row chained over this order
    is the A100's instructions in turn."""
    span = 8 * kwidth
    if K % span:
        raise NotImplementedError(f"harness.tensor_cores: {what}: K={K} is not a multiple of {span}: the k order of a "
                                  f"kWidth={kwidth} operand layout is derived for whole spans of {span} only")
    q = torch.arange(16)
    slot = (q // 8) * 4 * kwidth + (q % 8) // 2 * kwidth + q % 2  # k within the span of instruction 0's slots
    inst = 2 * torch.arange(kwidth // 2)
    one = (slot[None, :] + inst[:, None]).reshape(-1)  # the span's instructions in turn
    return (torch.arange(K // span)[:, None] * span + one[None, :]).reshape(-1)


def _tf32x3(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, p: BlockFMA) -> torch.Tensor:
    """Triton's F32DotTC split (see the module docstring)."""
    a_big, b_big = _tf32_rna(A), _tf32_rna(B)
    a_small = (A.float() - a_big).double()
    b_small = (B.float() - b_big).double()
    a_big, b_big = a_big.double(), b_big.double()

    def tc(x, y, c):
        return _block_chain(_tf32_rz(x), _tf32_rz(y), c, p, -126, -126)

    zero = torch.zeros_like(C)
    # the three dots are one chain over their k ranges end to end (each padded to whole blocks with zero products,
    # which change nothing), from 0: fast.chain once instead of three times (its set-up per call is a third of a
    # 64x64x64 tf32 chain's time); where it declines (inf/NaN: the NaN rule below), the three chains
    pad = (-A.shape[-1]) % p.nfma
    a3 = torch.cat([torch.nn.functional.pad(_tf32_rz(x), (0, pad)) for x in (a_small, a_big, a_big)], -1)
    b3 = torch.cat([torch.nn.functional.pad(_tf32_rz(y), (0, 0, 0, pad)) for y in (b_big, b_small, b_big)], -2)
    out = fast.chain(a3, b3, zero, p, -126, -126)
    if out is not None:
        return (out + C.float()).double()
    d1 = tc(a_big, b_small, tc(a_small, b_big, zero))
    d1 = torch.where(torch.isnan(d1), zero, d1)
    d2 = tc(a_big, b_big, d1)
    return (d2.float() + C.float()).double()
