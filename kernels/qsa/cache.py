"""The compressed indexer cache and the kernels that fill it (keys) or match it (queries).

Store path (pre-indexer): mean-pool each complete group of ``compress_ratio`` raw keys (fp32 accumulate,
round to bf16), Gemma RMSNorm (``weight + 1``), cast to the cache dtype (FP8 saturating), scatter into the
paged cache ``[num_blocks, page_size, 1, D]`` through a compressed slot mapping. Query path: the same
RMSNorm + cast on ``[T, H, D]``. There are no scales: both sides are normalized before quantization.

Each entry point has a fused Triton kernel and the unfused torch path (``fused=False``), which is also
what the kernel is tested against.

Non-finite and out-of-range values (one behaviour for the fused kernels and the torch path, every lane),
the "satfinite" rule of the hardware's ``cvt.rn.satfinite``: FP8 casts saturate finite values and ±inf
to ±448, and NaN stays NaN (code 0x7F/0xFF: e4m3fn has no inf, and a NaN must not pass for a valid
extreme score). The kernels clamp explicitly before converting because the Triton interpreter turns
out-of-range values into NaN codes, and keep NaN out of the clamp because Triton's min/max return the
non-NaN operand. Upstream of the cast, an input row holding ±inf normalizes to NaN at the inf and 0
elsewhere (rms = inf, inf · 0) and a NaN anywhere in a row makes the whole row NaN, as in plain torch.
On the interpreter the rounding itself is done explicitly (``_round_e4m3``, ``_round_bf16``), because
its fp32 -> e4nv and fp32 -> bf16 conversions are wrong (no carry across binades, truncation, wrong ties; triton 3.9).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._grid import cdiv
from kernels._interpreter import runs_on_interpreter
from kernels.qsa import _checks
from kernels.qsa.config import FP8_MAX, IndexerConfig
from kernels.qsa.reference import pool_keys, rms_norm_cast

__all__ = ["IndexerKVCache", "store_compressed_keys", "normalize_query"]


class IndexerKVCache:
    """A paged compressed-key cache ``[num_blocks, page_size, 1, head_dim]`` of the config's dtype."""

    def __init__(self, kv: torch.Tensor, config: IndexerConfig) -> None:
        if not isinstance(config, IndexerConfig):
            raise TypeError(f"config must be an IndexerConfig, got {type(config).__name__}")
        _checks.tensor("kv", kv, dim=4)
        want = ("num_blocks", config.page_size, 1, config.head_dim)
        if kv.shape[1:] != want[1:]:
            raise ValueError(
                f"kv must be [num_blocks, page_size={config.page_size}, 1, "
                f"head_dim={config.head_dim}], got {tuple(kv.shape)}"
            )
        if kv.dtype != config.dtype:
            raise TypeError(
                f"kv.dtype must be the indexer dtype {config.dtype} "
                f"(indexer_kv_dtype={config.indexer_kv_dtype!r}), got {kv.dtype}"
            )
        if kv.stride(-1) != 1:
            raise ValueError(f"kv must be contiguous in head_dim (stride(-1) == 1), got strides {kv.stride()}")
        _checks.writable("kv", kv)
        self.kv = kv
        self.config = config

    @classmethod
    def empty(
        cls, config: IndexerConfig, num_blocks: int, device: torch.device | str = "cpu"
    ) -> IndexerKVCache:
        if not isinstance(config, IndexerConfig):
            raise TypeError(f"config must be an IndexerConfig, got {type(config).__name__}")
        _checks.count("num_blocks", num_blocks, minimum=1)
        kv = torch.zeros(num_blocks, config.page_size, 1, config.head_dim, dtype=config.dtype, device=device)
        return cls(kv, config)

    @property
    def dtype(self) -> torch.dtype:
        return self.kv.dtype

    @property
    def device(self) -> torch.device:
        return self.kv.device

    @property
    def num_blocks(self) -> int:
        return self.kv.shape[0]

    @property
    def page_size(self) -> int:
        return self.kv.shape[1]

    @property
    def head_dim(self) -> int:
        return self.kv.shape[3]

    def check_query(self, q: object, name: str = "q") -> torch.Tensor:
        """``q`` must be [rows, heads, head_dim] of the cache dtype on the cache device."""
        q = _checks.tensor(name, q, dim=3, device=self.device)
        _checks.same_dtype(name, q, self.dtype)
        if q.shape[2] != self.head_dim:
            raise ValueError(f"{name} must be [rows, heads, head_dim={self.head_dim}], got {tuple(q.shape)}")
        if q.shape[1] < 1:
            raise ValueError(f"{name} needs at least one head, got {tuple(q.shape)}")
        return q


@triton.jit
def _round_e4m3(y):
    # Round fp32 (already clamped to ±448) to the nearest float8_e4m3fn value, ties to even, in fp32.
    # Used on the interpreter only: its fp32 -> e4nv cast drops the carry when rounding up across a
    # binade (1.96875 -> 1.0 instead of 2.0), breaks ties the wrong way and is wrong near the subnormal
    # range (measured, triton 3.9), but it converts exactly representable values correctly. GPUs round in
    # hardware (cvt.rn.satfinite) and skip this.
    ybits = y.to(tl.int32, bitcast=True)
    a = tl.abs(y)
    e = tl.maximum(((a.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127, -6)  # subnormals share 2^-6's step
    step = ((e - 3 + 127) << 23).to(tl.float32, bitcast=True)  # 3 mantissa bits
    r = ((a / step + 8388608.0) - 8388608.0) * step  # +2^23 - 2^23: round-to-nearest-even to an integer
    return tl.where(ybits < 0, -r, r)


@triton.jit
def _round_bf16(x):
    # fp32 -> nearest bf16 value (ties to even), still fp32. Interpreter only: its fp32 -> bf16 cast
    # truncates (round toward zero), so the kernel rounds first and the cast is then exact.
    bits = x.to(tl.int32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536  # -65536 == 0xFFFF0000 as int32
    # NaN passes through untouched: rounding its payload could carry into inf (or wrap to 0).
    return tl.where(x == x, bits.to(tl.float32, bitcast=True), x)


@triton.jit
def _to_out(y, DT: tl.constexpr, IS_FP8: tl.constexpr, EMULATE_ROUND: tl.constexpr):
    # The final cast. The interpreter converts an fp32 NaN to a finite e4m3 code (measured: 384), so there
    # the NaN code 0x7F is put in explicitly; hardware cvt.rn.satfinite keeps NaN by itself.
    c = y.to(DT)
    if IS_FP8 and EMULATE_ROUND:
        c = tl.where(y == y, c, tl.full(y.shape, 0x7F, tl.uint8).to(DT, bitcast=True))
    return c


@triton.jit
def _norm_cast(
    x, w, d_mask, D, eps, IS_FP8: tl.constexpr, FP8_LIM: tl.constexpr, EMULATE_ROUND: tl.constexpr
):
    # EMULATE_ROUND (interpreter lane only): round in fp32 arithmetic before the final cast, because the
    # interpreter's own float downcasts are wrong (see _round_bf16 / _round_e4m3).
    # x: [.., BLOCK_D] fp32 with zeros past D; same op order as reference.rms_norm_cast.
    ms = tl.sum(x * x, axis=-1, keep_dims=True) / D
    rstd = tl.div_rn(1.0, tl.sqrt_rn(ms + eps))
    y = x * rstd * (1.0 + w)
    if IS_FP8:
        # Saturate explicitly (the interpreter produces NaN codes past ±448); NaN stays NaN (y != y), as
        # torch.clamp and cvt.rn.satfinite keep it, where min/max alone would turn it into -448.
        # harness: equivalent-mutant(clamp): past FP8_LIM the final cast saturates on its own (cvt.rn.satfinite,
        # sm89+, docs/MEASUREMENTS.md; the interpreter lane's cast model too), and _round_e4m3 stays finite there
        y = tl.where(y == y, tl.minimum(tl.maximum(y, -FP8_LIM), FP8_LIM), y)
        if EMULATE_ROUND:
            y = _round_e4m3(y)
    elif EMULATE_ROUND:
        y = _round_bf16(y)
    return tl.where(d_mask, y, 0.0)


@triton.jit
def _compress_store_kernel(
    keys_ptr,
    w_ptr,
    slot_ptr,
    kv_ptr,
    stride_kt,
    stride_kvb,
    stride_kvp,
    D,
    eps,
    RATIO: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_D: tl.constexpr,
    PAGE: tl.constexpr,
    IS_FP8: tl.constexpr,
    FP8_LIM: tl.constexpr,
    EMULATE_ROUND: tl.constexpr,
):
    g = tl.program_id(0)
    slot = tl.load(slot_ptr + g).to(tl.int64)
    if slot >= 0:
        r = tl.arange(0, BLOCK_R)
        d = tl.arange(0, BLOCK_D)
        d_mask = d < D
        rows = (g * RATIO + r).to(tl.int64)
        m = (r[:, None] < RATIO) & d_mask[None, :]
        x = tl.load(keys_ptr + rows[:, None] * stride_kt + d[None, :], mask=m, other=0.0).to(tl.float32)
        pooled = tl.sum(x, axis=0) / RATIO
        if EMULATE_ROUND:
            pooled = _round_bf16(pooled)
        pooled = pooled.to(tl.bfloat16).to(tl.float32)
        # harness: equivalent-mutant(other): w past D reaches only lanes _norm_cast zeroes (d_mask) and the store masks
        w = tl.load(w_ptr + d, mask=d_mask, other=0.0).to(tl.float32)
        y = _norm_cast(pooled, w, d_mask, D, eps, IS_FP8, FP8_LIM, EMULATE_ROUND)
        blk = slot // PAGE
        off = slot % PAGE
        y = _to_out(y, kv_ptr.dtype.element_ty, IS_FP8, EMULATE_ROUND)
        tl.store(kv_ptr + blk * stride_kvb + off * stride_kvp + d, y, mask=d_mask)


@triton.jit
def _norm_cast_kernel(
    x_ptr,
    w_ptr,
    out_ptr,
    n_rows,
    stride_x,
    stride_o,
    D,
    eps,
    BLOCK_M: tl.constexpr,
    BLOCK_D: tl.constexpr,
    IS_FP8: tl.constexpr,
    FP8_LIM: tl.constexpr,
    EMULATE_ROUND: tl.constexpr,
):
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    d_mask = d < D
    m = (rows[:, None] < n_rows) & d_mask[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_x + d[None, :], mask=m, other=0.0).to(tl.float32)
    # harness: equivalent-mutant(other): w past D reaches only lanes _norm_cast zeroes (d_mask) and the store masks
    w = tl.load(w_ptr + d, mask=d_mask, other=0.0).to(tl.float32)
    y = _norm_cast(x, w[None, :], d_mask[None, :], D, eps, IS_FP8, FP8_LIM, EMULATE_ROUND)
    y = _to_out(y, out_ptr.dtype.element_ty, IS_FP8, EMULATE_ROUND)
    tl.store(out_ptr + rows[:, None] * stride_o + d[None, :], y, mask=m)


def _check_weight(weight: object, d: int, device: torch.device) -> torch.Tensor:
    w = _checks.tensor("weight", weight, dim=1, dtypes=(torch.bfloat16, torch.float32), device=device)
    if w.shape[0] != d:
        raise ValueError(f"weight must be [head_dim={d}], got {tuple(w.shape)}")
    return w.contiguous()


def store_compressed_keys(
    cache: IndexerKVCache,
    keys: torch.Tensor,
    slot_mapping: torch.Tensor,
    weight: torch.Tensor,
    *,
    fused: bool = True,
) -> None:
    """Summarize ``keys`` [T, D] (bf16) into ``T // compress_ratio`` compressed keys and write them.

    ``slot_mapping`` [T // compress_ratio] gives each group's cache slot (``block * page_size + offset``);
    ``-1`` skips a group. Incomplete trailing groups are ignored.
    """
    if not isinstance(cache, IndexerKVCache):
        raise TypeError(f"cache must be an IndexerKVCache, got {type(cache).__name__}")
    _checks.flag("fused", fused)
    cfg = cache.config
    keys = _checks.tensor("keys", keys, dim=2, dtypes=(torch.bfloat16,), device=cache.device)
    if keys.shape[1] != cache.head_dim:
        raise ValueError(f"keys must be [tokens, head_dim={cache.head_dim}], got {tuple(keys.shape)}")
    if keys.stride(1) != 1:
        keys = keys.contiguous()
    groups = keys.shape[0] // cfg.compress_ratio
    slots = _checks.int_tensor("slot_mapping", slot_mapping, dim=1, device=cache.device)
    if slots.shape[0] != groups:
        raise ValueError(
            f"slot_mapping must have T // compress_ratio = {keys.shape[0]} // "
            f"{cfg.compress_ratio} = {groups} entries, got {slots.shape[0]}"
        )
    n_slots = cache.num_blocks * cache.page_size
    if groups and (int(slots.max()) >= n_slots or int(slots.min()) < -1):
        raise ValueError(
            f"slot_mapping entries must be -1 (skip) or in [0, {n_slots}) "
            f"(num_blocks × page_size), got range [{int(slots.min())}, {int(slots.max())}]"
        )
    live = slots[slots >= 0]
    if live.numel() != torch.unique(live).numel():
        raise ValueError("slot_mapping has a duplicate slot: two groups would race for one cache row")
    w = _check_weight(weight, cache.head_dim, cache.device)
    if groups == 0:
        return
    if not fused:
        y = rms_norm_cast(pool_keys(keys, cfg.compress_ratio), w, cfg.rms_eps, cache.dtype)
        keep = slots >= 0
        s = slots[keep].long()
        cache.kv[s // cache.page_size, s % cache.page_size, 0] = y[keep]
        return
    kv = cache.kv
    _compress_store_kernel[(groups,)](
        keys,
        w,
        slots,
        kv,
        keys.stride(0),
        kv.stride(0),
        kv.stride(1),
        cache.head_dim,
        cfg.rms_eps,
        RATIO=cfg.compress_ratio,
        BLOCK_R=triton.next_power_of_2(cfg.compress_ratio),
        BLOCK_D=triton.next_power_of_2(cache.head_dim),
        PAGE=cache.page_size,
        IS_FP8=cache.dtype == torch.float8_e4m3fn,
        FP8_LIM=FP8_MAX,
        EMULATE_ROUND=runs_on_interpreter(_compress_store_kernel),
    )


def normalize_query(
    q: torch.Tensor, weight: torch.Tensor, *, eps: float, dtype: torch.dtype, fused: bool = True
) -> torch.Tensor:
    """Gemma RMSNorm of ``q`` [T, H, D] over D, cast to the indexer ``dtype`` (bf16 or FP8 saturating)."""
    q = _checks.tensor("q", q, dim=3, dtypes=(torch.bfloat16, torch.float16, torch.float32))
    _checks.flag("fused", fused)
    if dtype not in (torch.bfloat16, torch.float8_e4m3fn):
        raise NotImplementedError(f"dtype must be torch.bfloat16 or torch.float8_e4m3fn, got {dtype}")
    if q.shape[2] < 1:
        raise ValueError(f"q must be [tokens, heads, head_dim >= 1], got {tuple(q.shape)}")
    if not (isinstance(eps, float) and 0 < eps < float("inf")):
        raise ValueError(f"eps must be a float > 0, got {eps!r}")
    t, h, d = q.shape
    w = _check_weight(weight, d, q.device)
    if not fused:
        return rms_norm_cast(q, w, eps, dtype)
    x = q.reshape(t * h, d)
    if x.stride(1) != 1:
        x = x.contiguous()
    out = torch.empty(t, h, d, dtype=dtype, device=q.device)
    n = t * h
    if n == 0:
        return out
    block_m = 16
    _norm_cast_kernel[(cdiv(n, block_m),)](
        x,
        w,
        out,
        n,
        x.stride(0),
        d,
        d,
        eps,
        BLOCK_M=block_m,
        BLOCK_D=triton.next_power_of_2(d),
        IS_FP8=dtype == torch.float8_e4m3fn,
        FP8_LIM=FP8_MAX,
        EMULATE_ROUND=runs_on_interpreter(_norm_cast_kernel),
    )
    return out
