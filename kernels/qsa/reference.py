"""Torch references for the QSA indexer: fp32 math on the dequantized bf16 / fp8 inputs.

Why plain torch: these are what the kernels are judged against, so they trade speed for obviousness
(gather every visible key, one einsum, one ``torch.topk``). They also serve as the unfused store path.
"""

from __future__ import annotations

import torch

from kernels.qsa.config import FP8_MAX

__all__ = ["pool_keys", "rms_norm_cast", "paged_keys", "logits_reference", "select_from_logits"]


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


def logits_reference(
    q: torch.Tensor,
    kv: torch.Tensor,
    block_table: torch.Tensor,
    row_req: torch.Tensor,
    visible: torch.Tensor,
    n_cols: int,
) -> torch.Tensor:
    """``logits[r, c] = Σ_h relu(k_c · q_{r,h})`` in fp32 for ``c < visible[r]``, ``-inf`` beyond."""
    rows = q.shape[0]
    out = torch.full((rows, n_cols), -torch.inf, dtype=torch.float32, device=q.device)
    for r in range(rows):
        v = int(visible[r])
        if v == 0:
            continue
        k = paged_keys(kv, block_table, int(row_req[r]), v)
        out[r, :v] = torch.relu(k @ q[r].float().T).sum(dim=1)
    return out


def select_from_logits(logits: torch.Tensor, visible: torch.Tensor, k: int) -> torch.Tensor:
    """Top-``k`` columns of each row among the visible ones, int32, ``-1``-padded (sorted by score)."""
    rows, width = logits.shape
    out = torch.full((rows, k), -1, dtype=torch.int32, device=logits.device)
    kk = min(k, width)
    if kk == 0 or rows == 0:
        return out
    idx = torch.topk(logits, kk, dim=1).indices
    keep = torch.arange(kk, device=logits.device)[None, :] < visible.to(logits.device)[:, None].clamp(max=kk)
    out[:, :kk] = torch.where(keep, idx, -1).to(torch.int32)
    return out
