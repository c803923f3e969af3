"""The comparisons every QSA test shares, built on the harness: logits in the dot-product error metric
(``|got - ref| <= atol + rtol·S``, S from :func:`kernels.qsa.reference.logits_scale`) and selections as
multisets with the tolerance that metric implies.

A plain module beside the tests (``import qsa_checks``: pytest puts each test file's directory on
``sys.path``), as FlashInfer's ``tests/test_helpers/``: the shipped ``kernels`` package never imports the
harness. The inputs these judge come from :mod:`kernels.qsa.inputs`; ``kernels`` is imported inside the
functions, as in the tests, because the plugin sets ``TRITON_INTERPRET`` at configure time.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from harness import tolerances
from harness.compare.checks import check_close
from harness.compare.message import Mismatch, format_mismatch
from harness.tolerances import Tolerance
from harness.topk import assert_topk_multiset_equal

__all__ = [
    "LOGITS_MSG",
    "assert_logits_close",
    "assert_selection",
    "check_logits",
    "require_row",
    "selection_overlap",
    "selection_tolerance",
]

#: The metric the ``qsa.logits`` rows are measured and applied in (the first line of a failure).
LOGITS_MSG = (
    "logits vs the fp32 reference in the dot-product error bound |got - ref| <= atol + rtol * S, "
    "S[r, c] = sum_h sum_d |q[r,h,d] * k[c,d]| (kernels.qsa.reference.logits_scale; 'scale' below); "
    "ref is -inf past visible_blocks, and got must be -inf there and only there"
)


def check_logits(
    got: torch.Tensor,
    ref: torch.Tensor,
    scale: torch.Tensor,
    tol: Tolerance,
    *,
    op: str = "",
    dtype: str = "",
) -> Mismatch | None:
    """The failure record, or None: ``|got - ref| <= tol.atol + tol.rtol * scale`` elementwise
    (``harness.compare.checks.check_close`` with ``scale=``), so ``got`` must be ``-inf`` exactly where
    ``ref`` is (past visible; inf must match exactly) and NaN never passes. The first line of the message
    says what S is. ``tol.max_mismatch`` is refused: it would let a finite logit past visible through.
    ``op`` and ``dtype`` default to the row's own (a rule built by hand reports as ``qsa.logits`` and the
    reference's dtype)."""
    from kernels.qsa.inputs import validate_logits

    validate_logits(got, ref, scale)
    if not isinstance(tol, Tolerance):
        raise TypeError(f"tol must be a harness.tolerances.Tolerance, got {type(tol).__name__}")
    if tol.max_mismatch:
        raise ValueError(f"tol {tol!r} has max_mismatch={tol.max_mismatch}: logits rows allow none (a "
                         f"mismatch it covered could be a finite logit past visible_blocks)")
    if not op and tol.op in ("", "*"):
        op = "qsa.logits"
    m = check_close(got, ref, tol, scale=scale, op=op, dtype=dtype)
    if m is not None:
        m.msg = f"{m.op}: {LOGITS_MSG}"
    return m


def assert_logits_close(
    got: torch.Tensor,
    ref: torch.Tensor,
    scale: torch.Tensor,
    tol: Tolerance,
    *,
    op: str = "",
    dtype: str = "",
) -> None:
    """Assert :func:`check_logits`."""
    __tracebackhide__ = True
    m = check_logits(got, ref, scale, tol, op=op, dtype=dtype)
    if m is not None:
        raise AssertionError(format_mismatch(m))


def require_row(
    tolerance: Callable[..., Tolerance], dtype: str, *, op: str = "qsa.logits", paste: str = ""
) -> Tolerance:
    """The ``op`` row for ``dtype`` from ``tolerance`` (the pytest fixture, or any ``(op=, dtype=)`` lookup);
    AssertionError with ``paste`` (a measured row) or how to measure one when the arch has none. Why: a
    fallback row (torch.testing's ``*/bf16/*``) was never measured in the S metric."""
    __tracebackhide__ = True
    try:
        tol = tolerance(op=op, dtype=dtype)
        found = f"lookup gave {tol!r}"
    except KeyError as e:
        tol, found = None, str(e.args[0] if e.args else e)
    if tol is None or tol.op != op:
        how = (
            f"add to tests/tolerances/qsa.toml:\n{paste}"
            if paste
            else "measure it with `python scripts/measure_qsa_logits.py` (or tests/kernels/qsa/test_qsa_gpu.py::"
            "test_logits_error_gpu -s) and add the printed row to tests/tolerances/qsa.toml"
        )
        raise AssertionError(f"no {op} row for {dtype} on this arch ({found}); {how}")
    return tol


def selection_tolerance(tol: Tolerance, scale: torch.Tensor) -> Tolerance:
    """The score tolerance of a top-k taken from logits within ``tol`` (in the S metric) of the reference.

    Why ``2 * (atol + rtol * max S)``: a selected column may beat a better one by the error of both, so
    sorted selected reference scores lie within twice the logit error of the reference top-k (harness.topk
    applies one absolute tolerance to a whole case; S varies little across rows of normalized inputs).
    """
    fin = scale[torch.isfinite(scale)]
    smax = float(fin.max()) if fin.numel() else 0.0
    return Tolerance(atol=2.0 * (tol.atol + tol.rtol * smax), key=f"{tol.key} x2 at max S={smax:.3g}")


def assert_selection(
    sel: torch.Tensor,
    q: torch.Tensor,
    kv: torch.Tensor,
    block_table: torch.Tensor,
    row_req: torch.Tensor,
    visible: torch.Tensor,
    *,
    k: int,
    tol: Tolerance,
    op: str,
    dtype: str = "",
) -> tuple[torch.Tensor, Tolerance]:
    """Assert ``sel`` is a top-``k`` of the fp32 reference logits (multiset rules of harness.topk) within
    :func:`selection_tolerance` of the tie band: for a ``qsa.logits`` row ``tol``, the ``qsa.select`` row of
    its dtype and arch (the measured logit error: the logits row is the derived worst case, too wide a band to
    tell a wrong pick, see tests/tolerances/qsa.toml); any other row as given. Returns (reference logits,
    that tolerance) for further checks. ``op`` names the selection; ``dtype`` defaults to the row's."""
    __tracebackhide__ = True
    from kernels.qsa.reference import logits_reference, logits_scale

    if tol.op == "qsa.logits":
        tol = tolerances.lookup("qsa.select", tol.dtype, tol.arch)
    n = int(visible.max()) if visible.numel() else 0
    ref = logits_reference(q, kv, block_table, row_req, visible, n)
    sel_tol = selection_tolerance(tol, logits_scale(q, kv, block_table, row_req, visible, n))
    assert_topk_multiset_equal(sel, ref, k=k, visible=visible, tol=sel_tol, op=op, dtype=dtype or tol.dtype)
    return ref, sel_tol


def selection_overlap(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    """(mean, worst) over rows with a selection of |a ∩ b| / |a| (pads excluded)."""
    fr = []
    for ra, rb in zip(a.tolist(), b.tolist(), strict=True):
        sa, sb = set(ra) - {-1}, set(rb) - {-1}
        if sa:
            fr.append(len(sa & sb) / len(sa))
    if not fr:
        raise ValueError("selection_overlap: no row of a selects anything")
    return sum(fr) / len(fr), min(fr)
