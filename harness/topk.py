"""Top-k selections compared as multisets of reference scores, not as index lists.

Why: with low-precision scores, ties and near-ties are common, so two correct kernels may return the same
columns in another order, or even a different column among equally good ones. Comparing indices (sorted
or not) makes such tests flaky. What must hold instead: the selection is structurally valid, the
reference scores it picked are the best ones within the tolerance, and nothing clearly better was left
out.

Checks per row, in this order (the first failing row and check is reported):

1. ``range``     every non-pad index satisfies ``0 <= idx < visible[r]``;
2. ``duplicate`` no index appears twice;
3. ``padding``   ``pad`` entries only trail the real ones;
4. ``count``     exactly ``min(k, visible[r])`` real entries;
5. ``nan``       no NaN among the reference scores of the visible columns;
6. ``values``    sorted reference scores at the selection == sorted reference scores of the reference
                 selection, within ``tol`` (``atol + rtol * |expected|``); an infinite score must face the
                 same infinity (a tolerance never stretches to or from inf);
7. ``missing``   every visible column whose reference score exceeds the k-th reference score by more
                 than the tolerance is selected.

NaN scores: a NaN among the reference scores of a row's *visible* columns fails that row (check ``nan``),
selected or not and whatever ``tol`` says: with a NaN the reference has no order, so no selection can be
shown right. Columns at or beyond ``visible[r]`` are not candidates and are never read, so padding may hold
anything (NaN included). ±inf scores are ordinary, ordered values: +inf is the best score there is.

Arguments that cannot be compared (not a tensor, meta, sparse, complex, bool, float indices, a ``pad`` that
is a real column index, duplicate or out-of-range ``ref_indices``) raise a TypeError/ValueError naming the
argument; a selection that is wrong, including one of the wrong shape, is an AssertionError.

The check returns a :class:`TopkMismatch` record, whose text is built at the end of this module; only the
public assert raises it, as in ``harness.compare``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from harness import summary, vacuity
from harness.compare.checks import check_tensor_arg, check_tol, row_identity
from harness.session import current_arch
from harness.text import Msg, check_msg, fmt_num, with_msg
from harness.tolerances import Tolerance

__all__ = ["assert_topk_multiset_equal", "check_topk_multiset_equal", "TopkMismatch"]

def _as_tol(tol: Tolerance | float) -> Tolerance:
    """``tol`` as a float rule: scores are compared by value, so an FP8 code row (max_ulp) is refused rather than
    read as rtol = atol = 0."""
    if isinstance(tol, Tolerance):
        t = check_tol(tol, "float")
        if t.max_mismatch:
            # every row's selection is judged whole; a fraction of rows allowed to fail is no rule of this check
            raise ValueError(f"tol: max_mismatch={t.max_mismatch!r} has no meaning for a top-k selection (each row "
                             f"must select the same multiset of scores); pass a row without it")
        return t
    if isinstance(tol, bool) or not isinstance(tol, (int, float)):
        raise TypeError(
            f"tol must be a harness.tolerances.Tolerance or a float atol, got {type(tol).__name__}"
        )
    if not math.isfinite(tol) or tol < 0:
        raise ValueError(f"tol must be a finite atol >= 0, got {tol!r}")
    return Tolerance(atol=float(tol))


def _index_tensor(t: Any, name: str) -> torch.Tensor:
    check_tensor_arg(t, name)
    if t.dtype.is_floating_point:
        raise TypeError(f"{name} must be an integer tensor, got {t.dtype}")
    return t


def _repeated(idx: torch.Tensor, is_pad: torch.Tensor, pad: int) -> torch.Tensor:
    """Entries whose value already occurs in their row (pads excluded), by sorting each row."""
    srt, order = idx.masked_fill(is_pad, pad).sort(dim=1)
    rep = torch.zeros_like(is_pad)
    rep[:, 1:] = (srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] != pad)
    return torch.zeros_like(is_pad).scatter(1, order, rep)


def _scores_at(ref: torch.Tensor, idx: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``ref[r, idx[r, j]]`` where ``mask``, ``-inf`` elsewhere (unmasked indices may be pads or out of range)."""
    return torch.where(mask, ref.gather(1, torch.where(mask, idx, 0)), -torch.inf)


def _visible_vector(visible: Any, rows: int, n: int, device: torch.device) -> torch.Tensor:
    if visible is None:
        return torch.full((rows,), n, dtype=torch.long, device=device)
    if isinstance(visible, int) and not isinstance(visible, bool):
        v = torch.full((rows,), visible, dtype=torch.long, device=device)
    elif isinstance(visible, torch.Tensor):
        if visible.dtype == torch.bool:
            raise ValueError(f"visible must be an int or an integer tensor of shape ({rows},), got a bool tensor")
        _index_tensor(visible, "visible")
        if visible.shape != (rows,):
            raise ValueError(
                f"visible must be an int or an integer tensor of shape ({rows},), "
                f"got {visible.dtype} {tuple(visible.shape)}"
            )
        v = visible.to(device=device, dtype=torch.long)
    else:
        raise TypeError(f"visible must be None, an int or an integer tensor, got {type(visible).__name__}")
    if v.numel() and (int(v.min()) < 0 or int(v.max()) > n):
        raise ValueError(
            f"visible must lie in [0, {n}] (the width of ref_scores), got range "
            f"[{int(v.min())}, {int(v.max())}]"
        )
    return v


def check_topk_multiset_equal(
    indices: torch.Tensor,
    ref_scores: torch.Tensor,
    *,
    k: int,
    visible: Any = None,
    ref_indices: torch.Tensor | None = None,
    tol: Tolerance | float = 0.0,
    pad: int = -1,
) -> tuple[TopkMismatch | None, dict[str, Any]]:
    """The comparison without raising: ``(mismatch or None, stats)``; stats feed the session summary."""
    tol_ = _as_tol(tol)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    check_tensor_arg(ref_scores, "ref_scores")
    if not ref_scores.dtype.is_floating_point:
        raise TypeError(f"ref_scores must be a floating-point tensor [rows, columns], got {ref_scores.dtype}")
    _index_tensor(indices, "indices")
    if isinstance(pad, bool) or not isinstance(pad, int):
        raise TypeError(f"pad must be an int, got {pad!r}")
    if ref_scores.dim() == 1:
        ref_scores = ref_scores[None]
    if indices.dim() == 1:
        indices = indices[None]
    if ref_scores.dim() != 2:
        raise ValueError(f"ref_scores must be [rows, columns], got shape {tuple(ref_scores.shape)}")
    rows, n = ref_scores.shape
    if 0 <= pad < n:
        raise ValueError(f"pad={pad} is a real column index (ref_scores has {n} columns); use a negative pad or >= {n}")
    tol_s = repr(tol_)
    stats: dict[str, Any] = {"n": rows, "worst_abs": 0.0, "worst_ratio": 0.0}
    if indices.dim() != 2 or indices.shape != (rows, k):
        return TopkMismatch(
            row=0, rows=rows, rows_failed=rows, check="shape", got_shape=tuple(indices.shape), k=k, tol=tol_s
        ), stats

    cpu = torch.device("cpu")
    idx = indices.to(cpu, torch.long)
    ref = ref_scores.detach().to(cpu, torch.float64)
    vis = _visible_vector(visible, rows, n, cpu)
    if n == 0:  # no candidate at all: a padding column keeps the gathers below well-defined
        ref = torch.full((rows, 1), -torch.inf, dtype=torch.float64)
        n = 1
    n_exp = torch.clamp(vis, max=k)
    pos = torch.arange(k)[None, :]
    is_pad = idx == pad
    real = ~is_pad

    # Reference selection: given, or top-k of the scores with invisible columns masked out.
    if ref_indices is not None:
        _index_tensor(ref_indices, "ref_indices")
        ridx = ref_indices.to(cpu, torch.long)
        if ridx.dim() == 1:
            ridx = ridx[None]
        if ridx.shape != (rows, k):
            raise ValueError(f"ref_indices must be [{rows}, {k}], got {tuple(ref_indices.shape)}")
        rreal = ridx != pad
        if bool((rreal & ((ridx < 0) | (ridx >= vis[:, None]))).any()):
            raise ValueError("ref_indices has an entry outside [0, visible) that is not the pad value")
        if not torch.equal(rreal.sum(1), n_exp):
            raise ValueError("ref_indices must hold exactly min(k, visible) real entries per row")
        if bool(_repeated(ridx, ~rreal, pad).any()):
            raise ValueError("ref_indices selects a column twice in a row")
        want = _scores_at(ref, ridx, rreal).sort(dim=1, descending=True).values
    else:
        masked = torch.where(torch.arange(n)[None, :] < vis[:, None], ref, -torch.inf)
        kk = min(k, n)
        want = torch.full((rows, k), -torch.inf, dtype=torch.float64)
        if kk:
            # NaN sorts first so the row's 'nan' check reports it; infinities stay what they are
            keyed = masked.nan_to_num(nan=math.inf, posinf=math.inf, neginf=-math.inf)
            want[:, :kk] = torch.topk(keyed, kk, dim=1).values
        want = torch.where(pos < n_exp[:, None], want, -torch.inf)

    bad: dict[str, torch.Tensor] = {}
    out_of_range = real & ((idx < 0) | (idx >= vis[:, None]))
    bad["range"] = out_of_range
    bad["duplicate"] = _repeated(idx, is_pad, pad)
    bad["padding"] = real & (torch.cumsum(is_pad.long(), dim=1) > 0)
    count_bad = real.sum(1) != n_exp
    bad["count"] = count_bad[:, None] & torch.ones_like(is_pad)

    vis_mask = torch.arange(n)[None, :] < vis[:, None]
    nan_cols = torch.isnan(ref) & vis_mask

    got_vals = _scores_at(ref, idx, real & ~out_of_range)
    got = got_vals.sort(dim=1, descending=True).values
    live = pos < n_exp[:, None]
    diff = (got - want).abs()
    allowed_v = tol_.atol + tol_.rtol * want.abs()
    infinite = torch.isinf(got) | torch.isinf(want)
    val_ok = torch.where(infinite, got == want, diff <= allowed_v)
    val_bad = live & ~val_ok

    kth = torch.where(n_exp > 0, want.gather(1, (n_exp - 1).clamp(min=0)[:, None])[:, 0], torch.inf)
    kth_allowed = torch.where(torch.isfinite(kth), tol_.atol + tol_.rtol * kth.abs(), 0.0)
    selected = torch.zeros(rows, n + 1, dtype=torch.bool)
    sel_cols = torch.where(real & ~out_of_range, idx, n)
    selected.scatter_(1, sel_cols, True)
    selected = selected[:, :n]
    must = vis_mask & (ref > (kth + kth_allowed)[:, None]) & ~selected
    must_bad = must.any(1)

    finite_live = live & torch.isfinite(diff)
    if bool(finite_live.any()):
        stats["worst_abs"] = float(diff[finite_live].max())
        with torch.no_grad():
            ratio = diff / torch.where(
                allowed_v > 0, allowed_v, torch.tensor(torch.finfo(torch.float64).tiny)
            )
        ratio = torch.where(finite_live & (diff > 0), ratio, torch.zeros_like(ratio))
        stats["worst_ratio"] = float(ratio.max())

    row_fail = {name: m.any(1) for name, m in bad.items()}
    row_fail["nan"] = nan_cols.any(1)
    row_fail["values"] = val_bad.any(1)
    row_fail["missing"] = must_bad
    # Structural failures make the value checks meaningless; only report those for structurally fine rows.
    any_fail = torch.zeros(rows, dtype=torch.bool)
    for m in row_fail.values():
        any_fail |= m
    if not bool(any_fail.any()):
        return None, stats
    if bool(torch.isnan(diff[live]).any()) or bool(nan_cols.any()):
        stats["worst_abs"] = float("nan")
        stats["worst_ratio"] = float("nan")

    r = int(any_fail.nonzero()[0, 0])
    check = next(
        name
        for name in ("range", "duplicate", "padding", "count", "nan", "values", "missing")
        if bool(row_fail[name][r])
    )
    v = int(vis[r])
    kth_r = float(kth[r]) if int(n_exp[r]) > 0 else None
    allowed_r = float(kth_allowed[r]) if kth_r is not None else None

    def score(c: int) -> float | None:
        return float(ref[r, c]) if 0 <= c < n else None

    m = TopkMismatch(
        row=r,
        rows=rows,
        rows_failed=int(any_fail.sum()),
        check=check,
        k=k,
        visible=v,
        kth=kth_r,
        allowed=allowed_r,
        tol=tol_s,
        selection=idx[r].tolist(),
        want_real=int(n_exp[r]),
    )
    if check in ("range", "duplicate", "padding"):
        m.entries = [(c, score(c), None) for c in idx[r][bad[check][r]].tolist()]
    elif check == "count":
        m.real = int(real[r].sum())
    elif check == "nan":
        m.entries = [(c, score(c), None) for c in nan_cols[r].nonzero()[:, 0].tolist()]
    elif check == "values":
        bad_pos = val_bad[r].nonzero()[:, 0].tolist()
        p0 = bad_pos[0]
        m.differ, m.worst_diff, m.rank = len(bad_pos), float(diff[r][val_bad[r]].max()), p0
        m.rank_got, m.rank_want, m.rank_allowed = float(got[r, p0]), float(want[r, p0]), float(allowed_v[r, p0])
        order_r = got_vals[r].argsort(descending=True)
        m.entries = [
            (int(idx[r, j]), float(got_vals[r, j]), float(want[r, i]))
            for i, j in enumerate(order_r.tolist())
            if i < int(n_exp[r])
        ]
    elif check == "missing":
        cols = must[r].nonzero()[:, 0]
        m.entries = [(c, score(c), None) for c in cols[ref[r, cols].argsort(descending=True)].tolist()]
    return m, stats


def assert_topk_multiset_equal(
    indices: torch.Tensor,
    ref_scores: torch.Tensor,
    *,
    k: int,
    visible: Any = None,
    ref_indices: torch.Tensor | None = None,
    tol: Tolerance | float = 0.0,
    pad: int = -1,
    op: str = "",
    dtype: str = "",
    msg: Msg = None,
) -> None:
    """Assert each row of ``indices`` [rows, k] is a valid top-k of ``ref_scores`` [rows, columns].

    ``visible`` (int or [rows] tensor, default all columns) limits the candidates of each row; rows with
    fewer than ``k`` visible columns carry ``pad`` as trailing padding. ``tol`` is a table ``Tolerance``
    (atol + rtol·|x|) or a float atol. ``op``/``dtype`` label the session-report observation; they default
    to the row's own (a table row knows which it is), else ``"topk"`` and ``"-"``.
    """
    __tracebackhide__ = True
    check_msg(msg)
    mismatch, stats = check_topk_multiset_equal(
        indices, ref_scores, k=k, visible=visible, ref_indices=ref_indices, tol=tol, pad=pad
    )
    op, dtype = row_identity(_as_tol(tol), op, dtype, "-")
    _record(op or "topk", dtype, stats, tol, mismatch is None)
    if mismatch is None:
        vacuity.probe(
            "assert_topk_multiset_equal",
            lambda c: check_topk_multiset_equal(c, ref_scores, k=k, visible=visible, ref_indices=ref_indices, tol=tol,
                                                pad=pad)[0] is None,
            lambda: vacuity.topk_corruptions(indices, ref_scores, k=k, visible=visible, pad=pad),
            op=op or "topk", dtype=dtype, tol=_as_tol(tol))
    if mismatch is not None:
        if msg is not None:
            mismatch.msg = msg
        raise AssertionError(format_topk(mismatch))


def _record(op: str, dtype: str, stats: dict[str, Any], tol: Any, passed: bool) -> None:
    summary.record(
        op=op,
        dtype=dtype,
        arch=current_arch(),
        n=stats["n"],
        worst_abs=stats["worst_abs"],
        tol=_as_tol(tol),
        passed=passed,
        worst_ratio=stats["worst_ratio"],
    )


# --- the failure text ------------------------------------------------------------------------------------

@dataclass
class TopkMismatch:
    """A failed ``harness.topk`` comparison: the first failing row and what is needed to show it."""

    row: int
    rows: int
    rows_failed: int
    check: str  # a key of _TOPK_CHECK
    entries: list[tuple[int, float | None, float | None]] = field(default_factory=list)  # (index, score, want)
    k: int = 0
    visible: int = 0
    kth: float | None = None
    allowed: float | None = None  # tolerance at the k-th score
    tol: str = ""
    selection: list[int] | None = None  # the failing row of the selection
    got_shape: tuple[int, ...] | None = None  # check "shape"
    real: int = 0  # check "count": real entries found, and min(k, visible) wanted
    want_real: int = 0
    # check "values": how many sorted scores differ, the worst |diff|, and the first differing rank
    differ: int = 0
    worst_diff: float | None = None
    rank: int = 0
    rank_got: float | None = None
    rank_want: float | None = None
    rank_allowed: float | None = None
    msg: Msg = None

    def message(self) -> str:
        return format_topk(self)


#: Rows of the offending-index table of a top-k failure.
MAX_SHOWN = 20

_TOPK_CHECK = {
    "shape": "selection has the wrong shape",
    "range": "index outside [0, visible)",
    "duplicate": "index selected more than once",
    "padding": "pad entry before a real entry (padding must trail)",
    "count": "wrong number of real entries (expected min(k, visible))",
    "nan": "NaN reference score among the visible columns (NaN never passes)",
    "values": "selected reference scores differ from the reference top-k beyond the tolerance",
    "missing": "column clear of the k-th reference score by more than the tolerance is not selected",
}


def _topk_detail(m: TopkMismatch) -> str:
    if m.check == "shape":
        return f"got {m.got_shape}, expected ({m.rows}, {m.k})"
    if m.check in ("range", "duplicate", "padding"):
        return f"selection row: {m.selection}"
    if m.check == "count":
        return (
            f"{m.real} real entries, expected {m.want_real} = min(k={m.k}, visible={m.visible}); "
            f"selection row: {m.selection}"
        )
    if m.check == "values":
        return (
            f"{m.differ} of {m.want_real} sorted scores differ; worst |diff| {fmt_num(m.worst_diff)} (first at "
            f"rank {m.rank}: got {fmt_num(m.rank_got)}, expected {fmt_num(m.rank_want)}, allowed "
            f"{fmt_num(m.rank_allowed)}). "
            "Selected indices with their reference scores:"
        )
    if m.check == "missing":
        return f"selection row: {m.selection}; not selected but required:"
    return ""


def format_topk(m: TopkMismatch) -> str:
    """The first failing row of a top-k comparison: which check, the offending indices, the tolerance."""
    pct = 100.0 * m.rows_failed / max(m.rows, 1)
    lines = [
        "Top-k selections are not equivalent!",
        f"Rows failing: {m.rows_failed} / {m.rows} ({pct:.1f}%); first: row {m.row}.",
        f"Row {m.row} failed check '{m.check}': {_TOPK_CHECK[m.check]}.",
    ]
    detail = _topk_detail(m)
    if detail:
        lines.append(detail)
    if m.entries:
        has_want = any(w is not None for _, _, w in m.entries)
        lines.append(f"{'index':>8}  {'ref score':>12}" + (f"  {'expected':>12}" if has_want else ""))
        for idx, s, w in m.entries[:MAX_SHOWN]:
            lines.append(f"{idx:>8}  {fmt_num(s):>12}" + (f"  {fmt_num(w):>12}" if has_want else ""))
        if len(m.entries) > MAX_SHOWN:
            lines.append(f"... {len(m.entries) - MAX_SHOWN} more")
    lines.append(f"k={m.k}, visible={m.visible}, k-th reference score: {fmt_num(m.kth)}")
    allowed = f", allowed {fmt_num(m.allowed)} at the k-th score" if m.allowed is not None else ""
    lines.append(f"tolerance: {m.tol}{allowed}")
    return with_msg("\n".join(lines), m.msg)

