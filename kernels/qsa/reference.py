"""Torch references for the QSA indexer: fp32 math on the dequantized bf16 / fp8 inputs.

Why plain torch: these are what the kernels are judged against, so they trade speed for obviousness
(gather every visible key, one einsum, one ``torch.topk``). They also serve as the unfused store path.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from kernels.qsa.config import FP8_MAX

__all__ = [
    "pool_keys",
    "rms_norm_cast",
    "paged_keys",
    "logits_reference",
    "logits_scale",
    "select_from_logits",
    "select_exact",
]


def pool_keys(keys: torch.Tensor, compress_ratio: int) -> torch.Tensor:
    """Mean of each complete group of ``compress_ratio`` rows of ``keys`` [T, D]: fp32 sum, rounded to bf16.

    Trailing tokens that do not fill a group are not summarized (their block is not complete yet).
    """
    t, d = keys.shape
    g = t // compress_ratio
    x = keys[: g * compress_ratio].reshape(g, compress_ratio, d).float()
    return (x.sum(dim=1) / compress_ratio).to(torch.bfloat16)


def rms_norm_cast(x: torch.Tensor, weight: torch.Tensor, eps: float, dtype: torch.dtype) -> torch.Tensor:
    """Gemma-style RMSNorm over the last dim (``x / rms(x) * (1 + weight)``, fp32), cast to ``dtype``.

    FP8 saturates: values beyond ±448 become ±448 instead of NaN (the "fn" format has no inf).
    """
    xf = x.float()
    rstd = torch.rsqrt((xf * xf).sum(dim=-1, keepdim=True) / xf.shape[-1] + eps)
    y = xf * rstd * (1.0 + weight.float())
    if dtype == torch.float8_e4m3fn:
        y = y.clamp(-FP8_MAX, FP8_MAX)
    return y.to(dtype)


def paged_keys(kv: torch.Tensor, block_table: torch.Tensor, req: int, n: int) -> torch.Tensor:
    """The first ``n`` compressed keys of request ``req`` as fp32 [n, D] (dequantized)."""
    page = kv.shape[1]
    cols = torch.arange(n, device=kv.device)
    blocks = block_table[req, cols // page].long()
    return kv[blocks, cols % page, 0].float()


_Fn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

#: Most fp32 elements one batched product of ``_per_row`` holds ([rows, heads, columns]); 2**25 = 128 MiB.
_CHUNK_ELEMS = 1 << 25


def _per_row(fn: _Fn, fill: float, q, kv, block_table, row_req, visible, n_cols: int) -> torch.Tensor:
    """``out[r, :visible[r]] = fn(keys of row r as fp32 [v, D], q[r] as fp32 [H, D])``, ``fill`` beyond.

    Why per request: the rows of one request share its keys, so they are gathered once and the rows go
    through ``fn`` in batches ([rows, H, D] queries); a loop over rows costs a handful of launches per row,
    which is what made a 4k-row prefill check take a minute on a GPU shared by several test workers."""
    rows = q.shape[0]
    out = torch.full((rows, n_cols), fill, dtype=torch.float32, device=q.device)
    if rows == 0 or n_cols == 0:
        return out
    vis = visible.to(q.device).long()
    req = row_req.to(q.device).long()
    live = vis > 0
    for b in torch.unique(req[live]).tolist():
        idx = ((req == b) & live).nonzero()[:, 0]
        v = int(vis[idx].max())
        k = paged_keys(kv, block_table, b, v)
        cols = torch.arange(v, device=q.device)
        step = max(1, _CHUNK_ELEMS // max(1, v * q.shape[1]))
        for i in range(0, idx.numel(), step):
            r = idx[i : i + step]
            vals = fn(k, q[r].float())  # [len(r), v]
            out[r, :v] = torch.where(cols[None, :] < vis[r, None], vals, fill)
    return out


def _relu_head_sum(k: torch.Tensor, qr: torch.Tensor) -> torch.Tensor:
    # k [v, D], qr [R, H, D] -> [R, v]: a batch of the per-row products k @ q_r.T (bmm: the same bits as
    # one product per row), heads summed along the last dim as per row
    return torch.relu(torch.bmm(k.expand(qr.shape[0], -1, -1), qr.transpose(1, 2))).sum(dim=2)


def _abs_product_sum(k: torch.Tensor, qr: torch.Tensor) -> torch.Tensor:
    # Σ_h Σ_d |q_hd| |k_cd| = |k| · Σ_h |q_h|; fp64 so the scale itself carries no rounding worth naming
    per_row = qr.double().abs().sum(dim=1)[:, :, None]  # [R, D, 1]
    return torch.bmm(k.double().abs().expand(qr.shape[0], -1, -1), per_row).squeeze(2).float()


def logits_reference(
    q: torch.Tensor,
    kv: torch.Tensor,
    block_table: torch.Tensor,
    row_req: torch.Tensor,
    visible: torch.Tensor,
    n_cols: int,
) -> torch.Tensor:
    """``logits[r, c] = Σ_h relu(k_c · q_{r,h})`` in fp32 for ``c < visible[r]``, ``-inf`` beyond."""
    return _per_row(_relu_head_sum, -torch.inf, q, kv, block_table, row_req, visible, n_cols)


def logits_scale(
    q: torch.Tensor,
    kv: torch.Tensor,
    block_table: torch.Tensor,
    row_req: torch.Tensor,
    visible: torch.Tensor,
    n_cols: int,
) -> torch.Tensor:
    """``S[r, c] = Σ_h Σ_d |q_{r,h,d} · k_{c,d}|`` (fp32) for ``c < visible[r]``, 0 beyond.

    Why: it is what a logit's rounding error scales with. A dot product's error is bounded by
    ``γ_n · Σ|x_i y_i|``, not by ``|x · y|`` (products that cancel leave a small result and the whole
    error), and ReLU is 1-Lipschitz, so ``|got - ref| <= atol + rtol · S`` is the elementwise model that
    holds on every lane, SM90's reduced-precision FP8 accumulation included.
    """
    return _per_row(_abs_product_sum, 0.0, q, kv, block_table, row_req, visible, n_cols)


def select_from_logits(logits: torch.Tensor, visible: torch.Tensor, k: int) -> torch.Tensor:
    """Top-``k`` columns of each row among the visible ones, int32, ``-1``-padded (sorted by score).

    The torch formulation of the selection (the kernels use kernels.qsa.topk, which lists the same
    multiset in column order); tests compare selections as multisets, so either order passes."""
    rows, width = logits.shape
    out = torch.full((rows, k), -1, dtype=torch.int32, device=logits.device)
    kk = min(k, width)
    if kk == 0 or rows == 0:
        return out
    idx = torch.topk(logits, kk, dim=1).indices
    keep = torch.arange(kk, device=logits.device)[None, :] < visible.to(logits.device)[:, None].clamp(max=kk)
    out[:, :kk] = torch.where(keep, idx, -1).to(torch.int32)
    return out


def select_exact(logits: torch.Tensor, visible: torch.Tensor, k: int) -> torch.Tensor:
    """What ``kernels.qsa.topk.topk_columns`` returns, bit for bit: the top ``k`` visible columns under the
    order (score by its order-preserving int32 key, then the lower column), in ascending column order,
    ``-1``-padded. A stable descending sort of the keys (invisible columns sorted last); for checking the
    kernel at GPU sizes, where a Python loop is too slow."""
    b = logits.view(torch.int32)
    key = torch.where(b >= 0, b, b ^ 0x7FFFFFFF).long()
    cols = torch.arange(logits.shape[1], device=logits.device)
    key = torch.where(cols[None] < visible[:, None].long(), key, -(1 << 40))
    idx = torch.sort(key, dim=1, descending=True, stable=True).indices[:, :k]
    idx = torch.where(cols[None, :k] < visible[:, None].long(), idx, 1 << 30).sort(1).values
    return torch.where(idx == 1 << 30, -1, idx).to(torch.int32)
