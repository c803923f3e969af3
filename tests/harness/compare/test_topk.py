"""harness.topk: top-k selections compared as multisets of reference scores.

Each structural check is driven red once with a minimal bad selection; message fragments are pinned.
The tie tests show why the index-equality habit is flaky and that the multiset check is not lax.
"""

from __future__ import annotations

import re

import pytest
import torch

from harness import summary
from harness.tolerances import Tolerance
from harness.topk import assert_topk_multiset_equal, check_topk_multiset_equal

pytestmark = pytest.mark.lane_independent  # the same on every lane: the GPU lane skips it

SCORES = torch.tensor(
    [
        [5.0, 4.0, 4.0, 1.0, 0.0, 3.0],  # exact tie between columns 1 and 2 at the k-th place (k=2 -> 5, 4)
        [3.0, 2.0, 1.0, 0.0, 0.0, 9.0],
    ]
)


def _fails(indices, scores=SCORES, **kw) -> str:
    kw.setdefault("op", "topk.expected_failure")
    with summary.suspended(), pytest.raises(AssertionError) as e:  # deliberate: not a row of the report
        assert_topk_multiset_equal(torch.tensor(indices), scores, **kw)
    return str(e.value)


def test_valid_selections_pass_in_any_order_and_tie_choice():
    # Row 0: {0,1} and {2,0} pick different columns of the tie; row 1: order does not matter.
    assert_topk_multiset_equal(torch.tensor([[0, 1], [5, 0]]), SCORES, k=2)
    assert_topk_multiset_equal(torch.tensor([[2, 0], [0, 5]]), SCORES, k=2)


@pytest.mark.parametrize(
    ("indices", "kw", "check", "fragment"),
    [
        ([[0, 6], [5, 0]], {}, "range", r"index outside \[0, visible\)"),
        ([[0, 1], [5, -3]], {}, "range", r"selection row: \[5, -3\]"),
        ([[0, 0], [5, 0]], {}, "duplicate", r"selected more than once"),
        ([[-1, 0], [5, 0]], {}, "padding", r"padding must trail"),
        ([[0, -1], [5, 0]], {}, "count", r"1 real entries, expected 2 = min\(k=2, visible=6\)"),
        ([[0, 3], [5, 0]], {}, "values", r"worst \|diff\| 3 \(first at rank 1: got 1, expected 4"),
        ([[0, 1], [5, 2]], {"visible": torch.tensor([6, 2])}, "range", r"visible=2"),
    ],
)
def test_each_check_fails_with_its_name(indices, kw, check, fragment):
    text = _fails(indices, k=2, **kw)
    assert f"failed check '{check}'" in text
    assert re.search(fragment, text), text


def test_message_layout_is_pinned():
    text = _fails([[0, 1], [5, 2]], k=2, tol=Tolerance(atol=0.5, key="qsa.logits/bf16/interp"))
    lines = text.splitlines()
    assert lines[0] == "Top-k selections are not equivalent!"
    assert lines[1] == "Rows failing: 1 / 2 (50.0%); first: row 1."
    assert lines[2].startswith("Row 1 failed check 'values'")
    assert re.fullmatch(r"\s+index\s+ref score\s+expected", lines[4])
    assert re.fullmatch(r"\s+5\s+9\s+9", lines[5])
    assert re.fullmatch(r"\s+2\s+1\s+3", lines[6])
    assert lines[-2] == "k=2, visible=6, k-th reference score: 3"
    assert lines[-1] == (
        "tolerance: Tolerance(rtol=0.0e+00, atol=5.0e-01) [qsa.logits/bf16/interp], "
        "allowed 0.5 at the k-th score"
    )


def test_rows_with_few_or_zero_visible_are_padded():
    vis = torch.tensor([1, 0])
    assert_topk_multiset_equal(torch.tensor([[0, -1], [-1, -1]]), SCORES, k=2, visible=vis)
    text = _fails([[0, -1], [0, -1]], k=2, visible=vis)
    assert "Row 1 failed check 'range'" in text
    text = _fails([[0, 1], [-1, -1]], k=2, visible=vis)  # 1 is not visible in row 0
    assert "Row 0 failed check 'range'" in text


def test_k_larger_than_columns():
    assert_topk_multiset_equal(torch.tensor([[1, 0, -1, -1]]), torch.tensor([[2.0, 1.0]]), k=4)


def test_nan_never_passes():
    scores = torch.tensor([[1.0, float("nan"), 0.5, 0.0]])
    text = _fails([[0, 2]], scores, k=2)
    assert "failed check 'nan'" in text
    # even when the NaN column is not visible to the selection under a lax tolerance
    text = _fails([[0, 1]], scores, k=2, tol=1e9)
    assert "failed check 'nan'" in text


def test_near_ties_within_tolerance_are_accepted_and_beyond_rejected():
    scores = torch.tensor([[10.0, 7.0, 7.0 - 2e-3, 6.999, 1.0]])
    tol = Tolerance(atol=1e-2, key="t")
    assert_topk_multiset_equal(torch.tensor([[0, 3]]), scores, k=2, tol=tol)
    assert "failed check 'values'" in _fails([[0, 3]], scores, k=2, tol=Tolerance(atol=1e-4))


def test_index_equality_is_flaky_on_ties_while_multiset_is_not():
    """Two valid selections of the same scores: an index-equality check rejects one of them."""
    g = torch.Generator().manual_seed(1234)
    scores = torch.randn(3, 40, generator=g).clamp(max=2.0)
    scores[:, 0] = 9.0
    scores[:, 11] = 2.5 + 1e-6  # near-tie just above ...
    scores[:, 7] = scores[:, 3] = 2.5  # ... an exact tie across the k-th boundary, in every row
    k = 3  # {0, 11} certain, then one of the tied {3, 7}
    first = torch.tensor([[0, 11, 3]] * 3)
    second = torch.tensor([[11, 7, 0]] * 3)
    tol = Tolerance(atol=1e-5, key="t")
    assert_topk_multiset_equal(first, scores, k=k, tol=tol)
    assert_topk_multiset_equal(second, scores, k=k, tol=tol)
    assert not torch.equal(first, second)  # what an index comparison would have flagged
    # ...and sorting does not rescue it: the chosen *set* differs (3 vs 7).
    assert not torch.equal(first.sort(1).values, second.sort(1).values)
    # Dropping a clearly better column (0, score 9) for a tied one is still caught.
    dropped = torch.tensor([[11, 3, 7]] * 3)
    text = _fails(dropped.tolist(), scores, k=k, tol=tol)
    assert "failed check 'values'" in text and "Rows failing: 3 / 3" in text


def test_missing_check_catches_dropped_column_under_loose_value_tolerance():
    # Values agree within rtol=0.5, but column 0 (score 10) is clear of the k-th score 6 by more than that.
    scores = torch.tensor([[10.0, 6.0, 5.0, 4.0]])
    tol = Tolerance(rtol=0.5, key="loose")
    mismatch, _ = check_topk_multiset_equal(torch.tensor([[1, 2]]), scores, k=2, tol=tol)
    assert mismatch is not None and mismatch.check == "missing"
    assert mismatch.entries[0][0] == 0
    assert "not selected but required" in mismatch.message()


def test_ref_indices_define_the_expected_multiset():
    scores = torch.tensor([[3.0, 2.0, 1.0]])
    assert_topk_multiset_equal(torch.tensor([[1, 0]]), scores, k=2, ref_indices=torch.tensor([[0, 1]]))
    with pytest.raises(ValueError, match="ref_indices must hold exactly min"):
        assert_topk_multiset_equal(torch.tensor([[1, 0]]), scores, k=2, ref_indices=torch.tensor([[0, -1]]))


@pytest.mark.parametrize(
    ("kw", "exc", "match"),
    [
        ({"k": 0}, ValueError, "k must be an int >= 1"),
        ({"k": 2, "visible": torch.tensor([9])}, ValueError, r"visible must lie in \[0, 3\]"),
        ({"k": 2, "visible": torch.tensor([1.0])}, TypeError, "visible must be an integer tensor"),
        ({"k": 2, "visible": torch.tensor([True])}, ValueError, "got a bool tensor"),
        ({"k": 2, "visible": torch.tensor([1, 1])}, ValueError, r"shape \(1,\)"),
        ({"k": 2, "pad": 0}, ValueError, r"pad=0 is a real column index \(ref_scores has 3 columns\)"),
        ({"k": 2, "pad": 2}, ValueError, "pad=2 is a real column index"),
        ({"k": 2, "pad": True}, TypeError, "pad must be an int"),
        ({"k": 2, "ref_indices": torch.tensor([[0, 0]])}, ValueError, "ref_indices selects a column twice"),
        ({"k": 2, "ref_indices": torch.tensor([[0, 3]])}, ValueError, "ref_indices has an entry outside"),
        ({"k": 2, "ref_indices": torch.tensor([[0.0, 1.0]])}, TypeError, "ref_indices must be an integer tensor"),
        ({"k": 2, "tol": "1e-3"}, TypeError, "tol must be"),
    ],
)
def test_bad_arguments_raise(kw, exc, match):
    with pytest.raises(exc, match=match):
        assert_topk_multiset_equal(torch.tensor([[0, 1]]), torch.tensor([[3.0, 2.0, 1.0]]), **kw)


def test_wrong_shape_is_a_failure_not_an_error():
    text = _fails([[0, 1, 2]], torch.tensor([[3.0, 2.0, 1.0]]), k=2)
    assert "failed check 'shape'" in text and "got (1, 3), expected (1, 2)" in text


def test_observation_is_recorded():
    col = summary.active()
    if col is None:
        pytest.skip("harness plugin not active")
    before = len(col.observations)
    assert_topk_multiset_equal(torch.tensor([[0, 1]]), SCORES[:1], k=2, op="topk.selftest", dtype="fp32")
    obs = col.observations[before:]
    assert [(o.op, o.passed, o.n) for o in obs] == [("topk.selftest", True, 1)]


# ------------------------------------------------------------------------------- issue 9


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_infinite_scores_are_ordinary_values(sign):
    """+inf is the best score and -inf the worst; a correct selection of either passes (nan_to_num used to
    clamp the expected side to the largest finite double, so a correct +inf pick failed 'values')."""
    inf = sign * float("inf")
    scores = torch.tensor([[1.0, inf, 0.5, 0.25]])
    k = 1 if sign > 0 else 4
    sel = torch.tensor([[1]]) if sign > 0 else torch.tensor([[0, 2, 3, 1]])
    assert_topk_multiset_equal(sel, scores, k=k)
    assert_topk_multiset_equal(sel, scores, k=k, tol=Tolerance(rtol=0.5, atol=0.5))
    assert_topk_multiset_equal(sel, scores, k=k, ref_indices=sel.flip(1))


def test_an_inf_score_is_not_matched_by_a_finite_one_under_rtol():
    # want +inf, got 1.0: |diff| = inf <= rtol * |inf| = inf would pass without the equality rule for inf
    scores = torch.tensor([[1.0, float("inf"), 0.5]])
    text = _fails([[0]], scores, k=1, tol=Tolerance(rtol=0.5))
    assert "failed check 'values'" in text and "got 1, expected inf" in text


def test_minus_inf_kth_still_requires_finite_columns():
    scores = torch.tensor([[float("-inf"), 2.0, float("-inf")]])
    assert_topk_multiset_equal(torch.tensor([[1, 0]]), scores, k=2, tol=Tolerance(rtol=0.5))
    text = _fails([[0, 2]], scores, k=2, tol=Tolerance(rtol=0.5))
    assert "failed check 'values'" in text


def test_nan_scores_fail_the_row_only_where_visible():
    scores = torch.tensor([[3.0, 2.0, float("nan")], [3.0, 2.0, float("nan")]])
    vis = torch.tensor([2, 3])
    text = _fails([[0, 1], [0, 1]], scores, k=2, visible=vis)  # row 0 never reads column 2
    assert "Rows failing: 1 / 2 (50.0%); first: row 1." in text and "failed check 'nan'" in text
    assert_topk_multiset_equal(torch.tensor([[0, 1]]), scores[:1], k=2, visible=2)
    with pytest.raises(AssertionError, match="failed check 'nan'"), summary.suspended():  # ... with ref_indices too
        assert_topk_multiset_equal(torch.tensor([[0, 2]]), scores[1:], k=2, ref_indices=torch.tensor([[0, 2]]))


def test_pad_value_is_configurable_and_must_trail():
    scores = torch.tensor([[3.0, 2.0, 1.0]])
    assert_topk_multiset_equal(torch.tensor([[0, 1, 99, 99]]), scores, k=4, visible=2, pad=99)
    text = _fails([[0, 99, 1, 99]], scores, k=4, visible=2, pad=99)
    assert "failed check 'padding'" in text and "selection row: [0, 99, 1, 99]" in text
    # -1 is not the pad here: an index out of range
    assert "failed check 'range'" in _fails([[0, 1, -1, -1]], scores, k=4, visible=2, pad=99)


def test_k_larger_than_visible_needs_exactly_the_visible_count():
    scores = torch.tensor([[3.0, 2.0, 1.0, 9.0]])
    assert_topk_multiset_equal(torch.tensor([[2, 0, 1, -1, -1]]), scores, k=5, visible=3)
    text = _fails([[2, 0, -1, -1, -1]], scores, k=5, visible=3)
    assert "2 real entries, expected 3 = min(k=5, visible=3)" in text


def test_duplicates_are_found_wherever_they_sit():
    scores = torch.tensor([[5.0, 4.0, 3.0, 2.0]])
    text = _fails([[2, 0, 1, 2]], scores, k=4)
    assert "failed check 'duplicate'" in text and "selected more than once" in text
    text = _fails([[1, -1, 1, -1]], scores, k=4, visible=2)  # duplicate is checked before padding
    assert "failed check 'duplicate'" in text


def test_out_of_range_indices_at_both_ends():
    scores = torch.tensor([[5.0, 4.0, 3.0]])
    for bad in ([[0, 3]], [[-2, 0]], [[0, 2**40]]):
        text = _fails(bad, scores, k=2)
        assert "failed check 'range'" in text, bad
    assert "failed check 'range'" in _fails([[0, 2]], scores, k=2, visible=2)  # visible, not the width


def _meta():
    return torch.zeros(1, 3, device="meta")


@pytest.mark.parametrize(
    "arg, value, exc, match",
    [
        ("ref_scores", _meta, ValueError, "ref_scores is on the meta device"),
        ("indices", lambda: torch.zeros(1, 2, dtype=torch.long, device="meta"), ValueError,
         "indices is on the meta device"),
        ("ref_scores", lambda: torch.zeros(1, 3).to_sparse(), TypeError, "ref_scores has layout torch.sparse_coo"),
        ("ref_scores", lambda: torch.zeros(1, 3, dtype=torch.complex64), TypeError, "ref_scores is complex"),
        ("ref_scores", lambda: torch.zeros(1, 3, dtype=torch.long), TypeError,
         "ref_scores must be a floating-point tensor"),
        ("indices", lambda: torch.zeros(1, 2, dtype=torch.bool), TypeError, "indices is a bool tensor"),
        ("indices", lambda: torch.zeros(1, 2), TypeError, "indices must be an integer tensor, got torch.float32"),
        ("indices", lambda: [[0, 1]], TypeError, "indices must be a torch.Tensor, got list"),
        ("visible", lambda: torch.ones(1, dtype=torch.long, device="meta"), ValueError, "visible is on the meta"),
    ],
)
def test_unusable_inputs_name_the_argument(arg, value, exc, match):
    kw = {"indices": torch.tensor([[0, 1]]), "ref_scores": torch.tensor([[3.0, 2.0, 1.0]]), "k": 2}
    kw[arg] = value()
    with pytest.raises(exc, match=match):
        assert_topk_multiset_equal(**kw)


def test_report_builds_the_message_from_the_record():
    """The record renders its own text: the count story, the capped index table, the caller's msg."""
    from harness.topk import MAX_SHOWN, TopkMismatch

    m = TopkMismatch(row=1, rows=4, rows_failed=2, check="count", k=3, visible=2, kth=0.5, allowed=None,
                     tol="T", selection=[4, -1, -1], real=1, want_real=2)
    assert m.message().splitlines() == [
        "Top-k selections are not equivalent!",
        "Rows failing: 2 / 4 (50.0%); first: row 1.",
        "Row 1 failed check 'count': wrong number of real entries (expected min(k, visible)).",
        "1 real entries, expected 2 = min(k=3, visible=2); selection row: [4, -1, -1]",
        "k=3, visible=2, k-th reference score: 0.5",
        "tolerance: T",
    ]
    m = TopkMismatch(row=0, rows=1, rows_failed=1, check="nan", k=1, tol="T",
                     entries=[(c, float("nan"), None) for c in range(MAX_SHOWN + 3)], msg="layer 2")
    lines = m.message().splitlines()
    assert lines[0] == "layer 2" and lines[4] == "   index     ref score"
    assert lines[5] == "       0           nan" and lines[-3] == "... 3 more"
    assert len(lines) == 1 + 3 + 1 + MAX_SHOWN + 1 + 2


def test_wrong_shape_message_names_both_shapes():
    text = _fails([[0, 1, 2]], k=2)
    assert text.splitlines()[2:4] == [
        "Row 0 failed check 'shape': selection has the wrong shape.",
        "got (1, 3), expected (2, 2)",
    ], text


# ------------------------------------------------------------------ found by mutating harness/topk.py


def test_the_first_index_past_the_columns_may_pad():
    scores = torch.tensor([[3.0, 2.0, 1.0]])
    assert_topk_multiset_equal(torch.tensor([[0, 3]]), scores, k=2, visible=1, pad=3)
    with pytest.raises(ValueError, match=r"pad=2 is a real column index \(ref_scores has 3 columns\)"):
        assert_topk_multiset_equal(torch.tensor([[0, 2]]), scores, k=2, visible=1, pad=2)


def test_one_column_and_no_column():
    one = torch.tensor([[3.0], [-2.0]])
    assert_topk_multiset_equal(torch.tensor([[0], [0]]), one, k=1)
    assert "failed check 'count'" in _fails([[0], [-1]], one, k=1)
    # no candidate at all: every row is padding, and a real index is out of range
    assert_topk_multiset_equal(torch.tensor([[-1, -1]]), torch.zeros(1, 0), k=2)
    assert "failed check 'range'" in _fails([[0, -1]], torch.zeros(1, 0), k=2)


def test_a_nan_column_makes_the_recorded_error_nan():
    """The session report must not show a NaN row's error as a finite number (here every selected score is
    finite and equal to the reference's: only the unselected NaN column fails the row)."""
    scores = torch.tensor([[float("nan"), 1.0, 2.0]])
    mismatch, stats = check_topk_multiset_equal(torch.tensor([[2]]), scores, k=1)
    assert mismatch is not None and mismatch.check == "nan"
    assert stats["n"] == 1 and stats["worst_abs"] != stats["worst_abs"] and stats["worst_ratio"] != stats["worst_ratio"]


def test_the_entry_table_is_capped():
    scores = torch.arange(100.0)[None]
    text = _fails([list(range(30))], scores, k=30)
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if "index" in line and "ref score" in line)
    assert [int(line.split()[0]) for line in lines[head + 1 : head + 21]] == list(range(29, 9, -1))
    assert lines[head + 21] == "... 10 more"


def test_the_missing_check_allows_rtol_at_the_kth_score():
    """109 and 100 for the reference's 110 and 109 are equivalent under rtol=0.1 (|diff| 1 and 9 against
    11 and 10.9); the unselected 110 is within 10.9 of the k-th score, so it is not missing either."""
    scores = torch.tensor([[110.0, 109.0, 100.0]])
    assert_topk_multiset_equal(torch.tensor([[1, 2]]), scores, k=2, tol=Tolerance(rtol=0.1))
    # 6 and 5 for 10 and 6 pass the values under rtol=0.4 (4 <= 4, 1 <= 2.4), but 10 is 4 above the k-th
    # score 6, beyond its 2.4
    mismatch, _ = check_topk_multiset_equal(torch.tensor([[1, 2]]), torch.tensor([[10.0, 6.0, 5.0, 4.0]]), k=2,
                                            tol=Tolerance(rtol=0.4))
    assert mismatch.check == "missing" and mismatch.entries == [(0, 10.0, None)]
    assert mismatch.kth == 6.0 and mismatch.allowed == pytest.approx(2.4)


def test_failure_entries_carry_their_scores_in_order():
    scores = torch.tensor([[7.0, 1.0, 9.0, 8.0, 0.5]])
    dup, _ = check_topk_multiset_equal(torch.tensor([[0, 0]]), scores, k=2)
    assert dup.check == "duplicate" and dup.entries == [(0, 7.0, None)]  # column 0 has a score too
    far, _ = check_topk_multiset_equal(torch.tensor([[2, 5]]), scores, k=2)
    assert far.check == "range" and far.entries == [(5, None, None)]  # one past the last column: no score
    # 'missing' lists the dropped columns best first (rtol 0.97 lets 5, 4, 3 stand in for 100, 90, 5)
    miss, _ = check_topk_multiset_equal(torch.tensor([[2, 3, 4]]), torch.tensor([[90.0, 100.0, 5.0, 4.0, 3.0]]),
                                        k=3, tol=Tolerance(rtol=0.97))
    assert miss.check == "missing" and miss.entries == [(1, 100.0, None), (0, 90.0, None)]


def test_an_fp8_code_row_is_refused_not_read_as_exact():
    """Scores are compared by value: a code rule (max_ulp) has rtol = atol = 0 and judged them as exact, silently."""
    with pytest.raises(ValueError, match=r"is a codes rule, but a float comparison needs a float rule"):
        assert_topk_multiset_equal(torch.tensor([[0, 1]]), SCORES[:1], k=2, tol=Tolerance(max_ulp=3))
    for bad in (float("nan"), -1.0, float("inf")):
        with pytest.raises(ValueError, match=r"tol must be a finite atol >= 0"):
            assert_topk_multiset_equal(torch.tensor([[0, 1]]), SCORES[:1], k=2, tol=bad)


def test_a_row_allowing_a_fraction_of_mismatches_is_refused_not_ignored():
    """Each row's selection is judged whole: a ``max_mismatch`` would be silently dropped, so it is refused."""
    with pytest.raises(ValueError, match=r"tol: max_mismatch=0.5 has no meaning for a top-k selection"):
        assert_topk_multiset_equal(torch.tensor([[0, 1]]), SCORES[:1], k=2, tol=Tolerance(rtol=0.1, max_mismatch=0.5))


def test_msg_of_another_type_is_refused_on_a_passing_selection_too():
    with pytest.raises(TypeError, match=r"msg must be a str, a callable taking the failure text, or None, got int"):
        assert_topk_multiset_equal(torch.tensor([[0, 1]]), SCORES[:1], k=2, msg=123)
