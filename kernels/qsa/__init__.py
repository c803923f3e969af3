"""QSA sparse-attention indexer: compressed paged key cache, indexer logits and block selection.

Import only from tests or fixtures (never at conftest import time): Triton decides interpreter vs GPU when
the kernels are decorated, and the harness plugin sets ``TRITON_INTERPRET`` at configure time.
"""

from kernels.qsa.cache import IndexerKVCache, normalize_query, store_compressed_keys
from kernels.qsa.config import IndexerConfig, dtype_key, resolve_indexer_dtype
from kernels.qsa.logits import TILES, LogitsTile, paged_logits
from kernels.qsa.select import decode_row_req, decode_select, prefill_row_req, prefill_select

__all__ = [
    "IndexerConfig",
    "IndexerKVCache",
    "LogitsTile",
    "TILES",
    "decode_row_req",
    "decode_select",
    "dtype_key",
    "normalize_query",
    "paged_logits",
    "prefill_row_req",
    "prefill_select",
    "resolve_indexer_dtype",
    "store_compressed_keys",
]
