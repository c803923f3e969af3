"""Input builders for QSA tests, benchmarks and measurements: realistic structured keys/queries in a
scattered paged cache, and the shapes the ``qsa.logits`` tolerance rows are measured over.

Why structured rather than i.i.d. noise: with pure noise every column scores about the same and a top-k
comparison says little (any selection is "almost right"). Here keys follow a few per-request topic
directions that drift over the sequence, and each query row leans towards some topics, so the scores have
a real spread with a head of clearly-better columns plus a crowd of near-ties, as in a trained indexer.
Pages are handed out from a shuffled block pool so the page-table gather is exercised.

The measurement half (:data:`LOGITS_SWEEP`, :func:`prefill_logits`, :func:`logits_errors`,
:func:`paste_row`) is plain torch too: ``scripts/measure_qsa_logits.py`` runs it without pytest. The checks
that judge kernels with the harness live beside the tests (``tests/kernels/qsa/qsa_checks.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kernels.qsa.cache import IndexerKVCache, normalize_query, store_compressed_keys
from kernels.qsa.config import IndexerConfig
from kernels.qsa.logits import paged_logits
from kernels.qsa.reference import logits_reference, logits_scale
from kernels.qsa.select import decode_row_req, prefill_row_req

__all__ = [
    "REALISTIC",
    "IndexerCase",
    "LogitsShape",
    "LOGITS_SWEEP",
    "LOGITS_SWEEP_GPU",
    "build_case",
    "decode_rows",
    "decode_visible",
    "logits_errors",
    "paste_row",
    "prefill_logits",
    "prefill_rows",
    "prefill_visible",
    "queries",
    "validate_logits",
]

#: DeepSeek-V3.2-like indexer (64 heads × 128, 4 tokens per compressed key, 2048 selected tokens, pages of
#: 64): the GPU tests, the benchmark and the measurement sweep use it as ``IndexerConfig(**REALISTIC, ...)``.
REALISTIC = dict(num_heads=64, head_dim=128, compress_ratio=4, token_topk=2048, page_size=64)


@dataclass
class IndexerCase:
    config: IndexerConfig
    cache: IndexerKVCache
    block_table: torch.Tensor  # int32 [B, max_pages], -1 where unused
    raw_keys: list[torch.Tensor]  # per request, bf16 [T_b, D]
    key_weight: torch.Tensor
    query_weight: torch.Tensor
    topics: list[torch.Tensor]  # per request, fp32 [n_topics, D]
    num_tokens: list[int]


def _randn(rng: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=rng, dtype=torch.float32)


def build_case(
    config: IndexerConfig,
    num_tokens: list[int],
    *,
    rng: torch.Generator,
    device: str | torch.device,
    n_topics: int = 4,
    spare_blocks: int = 1,
    fused: bool = True,
) -> IndexerCase:
    """A cache holding ``num_tokens[b] // compress_ratio`` compressed keys for each request ``b``."""
    d, page, ratio = config.head_dim, config.page_size, config.compress_ratio
    pages = [-(-(t // ratio) // page) for t in num_tokens]
    max_pages = max(1, *pages) if pages else 1
    total = sum(pages) + spare_blocks
    perm = torch.randperm(total, generator=rng).to(torch.int32)
    bt = torch.full((len(num_tokens), max_pages), -1, dtype=torch.int32)
    pos = 0
    for b, p in enumerate(pages):
        bt[b, :p] = perm[pos : pos + p]
        pos += p
    cache = IndexerKVCache.empty(config, total, device)
    key_w = (0.1 * _randn(rng, d)).to(torch.bfloat16)
    q_w = (0.1 * _randn(rng, d)).to(torch.bfloat16)
    raw, topics = [], []
    for b, t in enumerate(num_tokens):
        top = _randn(rng, n_topics, d)
        # Topic of each token drifts slowly (segments of ~4 compressed blocks), as context does.
        seg = torch.randint(0, n_topics, (t // max(1, 4 * ratio) + 1,), generator=rng)
        z = seg.repeat_interleave(max(1, 4 * ratio))[:t]
        keys = (_randn(rng, t, d) + 1.5 * top[z]).to(torch.bfloat16)
        raw.append(keys)
        topics.append(top)
        g = t // ratio
        cols = torch.arange(g)
        slots = (bt[b, cols // page].long() * page + cols % page).to(torch.int32)
        store_compressed_keys(cache, keys.to(device), slots.to(device), key_w.to(device), fused=fused)
    return IndexerCase(
        config, cache, bt.to(device), raw, key_w.to(device), q_w.to(device), topics, list(num_tokens)
    )


def queries(
    case: IndexerCase, row_req: torch.Tensor, *, rng: torch.Generator, raw: bool = False
) -> torch.Tensor:
    """Normalized query rows [rows, H, D] in the cache dtype; each head leans to a topic of its request."""
    cfg = case.config
    rows = row_req.shape[0]
    out = torch.empty(rows, cfg.num_heads, cfg.head_dim)
    for r, b in enumerate(row_req.tolist()):
        top = case.topics[b]
        mix = torch.softmax(2.0 * _randn(rng, cfg.num_heads, top.shape[0]), dim=-1)
        out[r] = mix @ top + 0.7 * _randn(rng, cfg.num_heads, cfg.head_dim)
    q = out.to(torch.bfloat16).to(case.cache.device)
    if raw:
        return q
    return normalize_query(q, case.query_weight, eps=cfg.rms_eps, dtype=cfg.dtype)


def decode_visible(case: IndexerCase, decode_query_len: int) -> torch.Tensor:
    """Per decode row: MTP row ``j`` of ``L`` sees the first ``T - (L - 1 - j)`` tokens' complete blocks."""
    r = case.config.compress_ratio
    vis = [
        max(0, t - (decode_query_len - 1 - j)) // r for t in case.num_tokens for j in range(decode_query_len)
    ]
    return torch.tensor(vis, dtype=torch.int32, device=case.cache.device)


def prefill_visible(case: IndexerCase, query_lens: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(query_start_loc, visible) for prefill rows that are the last ``query_lens[b]`` tokens of each request:
    the row at position ``p`` sees the ``(p + 1) // compress_ratio`` complete blocks (early rows see none)."""
    r = case.config.compress_ratio
    vis, qsl = [], [0]
    for t, n in zip(case.num_tokens, query_lens, strict=True):
        if not 0 <= n <= t:
            raise ValueError(f"query_lens entries must be in [0, num_tokens], got {n} for {t} tokens")
        vis += [(p + 1) // r for p in range(t - n, t)]
        qsl.append(qsl[-1] + n)
    dev = case.cache.device
    return torch.tensor(qsl, dtype=torch.int32, device=dev), torch.tensor(vis, dtype=torch.int32, device=dev)


def decode_rows(
    case: IndexerCase, decode_query_len: int, *, rng: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(row_req, normalized queries, visible) of a request-major decode batch with MTP length ``L``."""
    row_req = decode_row_req(len(case.num_tokens), decode_query_len, case.cache.device)
    q = queries(case, row_req.cpu(), rng=rng)
    return row_req, q, decode_visible(case, decode_query_len)


def prefill_rows(
    case: IndexerCase, query_lens: list[int], *, rng: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(query_start_loc, row_req, normalized queries, visible) of packed prefill rows (see prefill_visible)."""
    qsl, vis = prefill_visible(case, query_lens)
    row_req = prefill_row_req(qsl, int(qsl[-1]))
    return qsl, row_req, queries(case, row_req.cpu(), rng=rng), vis


# --- the measurement sweep of the qsa.logits rows -------------------------------------------------------


@dataclass(frozen=True)
class LogitsShape:
    """One measured configuration: prefill rows that are the last ``query_lens[b]`` of ``tokens[b]``."""

    heads: int
    head_dim: int
    page: int
    ratio: int
    tokens: tuple[int, ...] = (13, 61, 5)
    query_lens: tuple[int, ...] = (9, 6, 5)

    @property
    def label(self) -> str:
        return f"h{self.heads}-d{self.head_dim}-p{self.page}-r{self.ratio}-t{max(self.tokens)}"


_SMALL_EXTRA = (300, 97)  # a longer request: more columns per row than the tests' (up to 300 at ratio 1)
#: Shapes the CPU tests apply the qsa.logits rows to (tests/kernels/qsa/test_qsa.py LOGIT_SHAPES and the
#: selection, tie and golden configs), then a grid over heads 1..64 × head_dim 64/128 × pages 1/7/64 × ratios 1/4.
LOGITS_SWEEP: tuple[LogitsShape, ...] = (
    *(LogitsShape(*s) for s in [(1, 64, 7, 1), (5, 128, 16, 4), (16, 64, 1, 3), (3, 128, 64, 8)]),
    *(LogitsShape(*s) for s in [(5, 64, 7, 4), (3, 128, 16, 3), (8, 128, 16, 4), (4, 64, 5, 2), (4, 64, 7, 4)]),
    *(
        LogitsShape(h, d, p, r, _SMALL_EXTRA, (24, 10))
        for h in (1, 4, 16, 64)
        for d in (64, 128)
        for p in (1, 7, 64)
        for r in (1, 4)
    ),
)
#: The realistic shapes of tests/kernels/qsa/test_qsa_gpu.py (too slow for the interpreter).
LOGITS_SWEEP_GPU: tuple[LogitsShape, ...] = (
    LogitsShape(64, 128, 64, 4, (8192 + 5, 3001, 700), (256, 100, 37)),
    LogitsShape(64, 128, 64, 4, (65536 + 13, 4099), (8, 8)),
    LogitsShape(32, 64, 16, 4, (16384, 2048), (64, 64)),
)


def prefill_logits(
    shape: LogitsShape, dtype: str, *, rng: torch.Generator, device: str | torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(kernel logits, fp32 reference, scale S) of ``shape`` for indexer dtype ``dtype`` (bf16 / fp8)."""
    cfg = IndexerConfig(
        num_heads=shape.heads,
        head_dim=shape.head_dim,
        compress_ratio=shape.ratio,
        token_topk=shape.ratio,
        page_size=shape.page,
        indexer_kv_dtype=dtype,
    )
    case = build_case(cfg, list(shape.tokens), rng=rng, device=device)
    _, row_req, q, vis = prefill_rows(case, list(shape.query_lens), rng=rng)
    got = paged_logits(case.cache, q, case.block_table, row_req, vis)
    args = (q, case.cache.kv, case.block_table, row_req, vis, got.shape[1])
    return got, logits_reference(*args), logits_scale(*args)


# --- measuring the qsa.logits rows: the worst error in their metric, and the row to paste -------------


def validate_logits(got: torch.Tensor, ref: torch.Tensor, scale: torch.Tensor) -> None:
    """TypeError/ValueError unless got, ref and scale are floating-point tensors of one shape [rows, columns]."""
    for name, t in (("got", got), ("ref", ref), ("scale", scale)):
        if not isinstance(t, torch.Tensor) or not t.dtype.is_floating_point:
            raise TypeError(f"{name} must be a floating-point tensor [rows, columns], got {type(t).__name__}")
    if not got.shape == ref.shape == scale.shape:
        raise ValueError(
            f"got, ref and scale must have one shape, got {tuple(got.shape)}, {tuple(ref.shape)}, "
            f"{tuple(scale.shape)}"
        )


def logits_errors(got: torch.Tensor, ref: torch.Tensor, scale: torch.Tensor) -> dict[str, float]:
    """Worst errors over the visible (finite-reference) columns, for measuring rows: ``scaled`` is
    max |got - ref| / S (the row metric; inf where S = 0 but got != ref), ``normwise`` the old
    max |got - ref| / max(|ref|, 1), ``abs`` max |got - ref|; NaN anywhere makes them NaN."""
    validate_logits(got, ref, scale)
    fin = torch.isfinite(ref)
    g, r, s = (t[fin].detach().double().cpu() for t in (got, ref, scale))
    if g.numel() == 0:
        return {"n": 0, "scaled": 0.0, "normwise": 0.0, "abs": 0.0, "max_ref": 0.0, "max_scale": 0.0}
    err = (g - r).abs()
    scaled = torch.where(err == 0, 0.0, err / s)  # S = 0 with an error gives inf: no row covers it

    def worst(t: torch.Tensor) -> float:
        return float("nan") if bool(torch.isnan(t).any()) else float(t.max())

    return {
        "n": int(g.numel()),
        "scaled": worst(scaled),
        "normwise": worst(err / r.abs().clamp(min=1.0)),
        "abs": worst(err),
        "max_ref": float(r.abs().max()),
        "max_scale": float(s.max()),
    }


def paste_row(op: str, dtype: str, arch: str, worst: float, how: str) -> str:
    """A ``tests/tolerances/qsa.toml`` row in the S metric for a measured worst ``|err|/S``: rtol = 2 x worst
    rounded up to two digits, atol 0; ``how`` says what was measured, for the row's note."""
    if not math.isfinite(worst):
        return f"# worst |err|/S is {worst} ({how}): not a tolerance but a bug (NaN, or an error where S = 0)"
    e = math.floor(math.log10(2 * worst)) - 1 if worst > 0 else 0
    rtol = math.ceil(2 * worst / 10**e) * 10**e if worst > 0 else 0.0
    return (
        f'[[tolerance]]\nop = "{op}"\ndtype = "{dtype}"\narch = "{arch}"\nrtol = {rtol:.2g}\natol = 0.0\n'
        f'note = """|got - ref| <= rtol * S, S = sum_h sum_d |q_hd k_cd| (logits_scale). {how}: worst |err|/S '
        f'{worst:.3e}; rtol = 2 x worst."""'
    )
