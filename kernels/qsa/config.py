"""Indexer configuration: which dtype the compressed indexer cache holds, and the selection size.

Why a resolver: the cache dtype arrives as a string from a model config; an unknown value must fail at
config time with the supported spellings, not as a dtype mismatch deep inside a kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["IndexerConfig", "resolve_indexer_dtype", "SUPPORTED_KV_DTYPES", "FP8_MAX", "dtype_key"]

#: Accepted ``indexer_kv_dtype`` spellings.
SUPPORTED_KV_DTYPES: dict[str, torch.dtype] = {
    "bf16": torch.bfloat16,
    "fp8": torch.float8_e4m3fn,
    "fp8_e4m3": torch.float8_e4m3fn,
}

#: Largest finite float8_e4m3fn value; casts saturate here (no inf in the "fn" format).
FP8_MAX = 448.0


def resolve_indexer_dtype(name: str) -> torch.dtype:
    """``"bf16"`` → bfloat16, ``"fp8"``/``"fp8_e4m3"`` → float8_e4m3fn; else NotImplementedError."""
    if not isinstance(name, str) or name not in SUPPORTED_KV_DTYPES:
        raise NotImplementedError(
            f"indexer_kv_dtype={name!r} is not supported; supported: {', '.join(SUPPORTED_KV_DTYPES)}"
        )
    return SUPPORTED_KV_DTYPES[name]


def dtype_key(dtype: torch.dtype) -> str:
    """Tolerance-table dtype key of an indexer dtype (``bf16`` or ``e4nv``)."""
    if dtype == torch.bfloat16:
        return "bf16"
    if dtype == torch.float8_e4m3fn:
        return "e4nv"
    raise NotImplementedError(f"indexer dtype {dtype} is not supported; supported: bfloat16, float8_e4m3fn")


def _pos_int(name: str, v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"IndexerConfig.{name} must be an int >= 1, got {v!r}")
    return v


@dataclass(frozen=True)
class IndexerConfig:
    """Shape and dtype of the sparse-attention indexer."""

    num_heads: int
    head_dim: int
    compress_ratio: int
    token_topk: int
    page_size: int
    indexer_kv_dtype: str = "bf16"
    rms_eps: float = 1e-6

    def __post_init__(self) -> None:
        for name in ("num_heads", "head_dim", "compress_ratio", "token_topk", "page_size"):
            _pos_int(name, getattr(self, name))
        if self.head_dim < 16:
            raise ValueError(f"IndexerConfig.head_dim must be >= 16 (tl.dot tile), got {self.head_dim}")
        if self.token_topk < self.compress_ratio:
            raise ValueError(
                f"IndexerConfig.token_topk ({self.token_topk}) must be >= compress_ratio"
                f" ({self.compress_ratio}):"
                " it selects token_topk // compress_ratio compressed blocks"
            )
        if not (isinstance(self.rms_eps, float) and 0 < self.rms_eps < float("inf")):
            raise ValueError(f"IndexerConfig.rms_eps must be a float > 0, got {self.rms_eps!r}")
        resolve_indexer_dtype(self.indexer_kv_dtype)

    @property
    def dtype(self) -> torch.dtype:
        return resolve_indexer_dtype(self.indexer_kv_dtype)

    @property
    def topk_blocks(self) -> int:
        """Compressed columns selected per query row."""
        return self.token_topk // self.compress_ratio
