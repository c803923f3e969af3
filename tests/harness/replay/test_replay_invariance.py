"""assert_deterministic and assert_batch_invariant on kernels of our own, on either lane: the correct kernel passes,
each defect fails with the first differing element, and every bad argument raises an error naming it."""

from __future__ import annotations

import pytest
import torch
from replay_kernels import Drifting, rows, total

from harness.replay import assert_batch_invariant, assert_deterministic

pytestmark = pytest.mark.unreported  # deliberate failures stay out of the session's report


@pytest.fixture
def x(device):
    return torch.arange(15, dtype=torch.float32, device=device).reshape(5, 3)


def neighbour(x):
    return rows(x, neighbour=True)


def _lines(e: pytest.ExceptionInfo) -> list[str]:
    return str(e.value).splitlines()


def test_a_row_wise_kernel_is_deterministic_and_batch_invariant(x):
    assert_deterministic(rows, x, repeats=3)
    assert_batch_invariant(rows, x)
    assert_batch_invariant(rows, x, splits=[2, 3])
    assert_batch_invariant(lambda a, b: (rows(a), rows(b)), (x, x + 1))  # several batched arguments
    assert_batch_invariant(lambda x: rows(x.T.contiguous()).T, x.T.contiguous(), batch_dim=1)


def test_a_row_that_reads_its_neighbour_fails_batch_invariance(x):
    with pytest.raises(AssertionError) as e:
        assert_batch_invariant(neighbour, x)
    assert _lines(e) == [
        "Batch results differ! (fn=neighbour)",
        "Row 0 of 5 (batch_dim=0) changes with the rows launched with it: in the split 1 of 5 (rows 0..0, "
        "launched alone)",
        "Output 'return': mismatched elements: 3 / 3 (100.0%)",
        "First difference at index (0, 0): whole batch has 0x40400000 (3), split 1 of 5 has 0x00000000 (0)",
        "Runs that differ from the whole batch: 5 of 6 (the splits [1, 1, 1, 1, 1], then the batch reversed)",
        "Rule: each row's outputs are the same bit for bit (NaN payloads and the sign of zero included) in the whole "
        "batch, in every split and in the batch reversed",
    ]


def test_the_lowest_differing_row_is_reported_in_batch_coordinates(x):
    """Splits [2, 3]: row 1 ends the first piece (no neighbour there) and differs; in the reversed batch row 0 is
    last (no neighbour) and differs: row 0 is reported, from the reversed run."""
    with pytest.raises(AssertionError) as e:
        assert_batch_invariant(neighbour, x, splits=[2, 3])
    lines = _lines(e)
    assert lines[1] == ("Row 0 of 5 (batch_dim=0) changes with the rows launched with it: in the reversed batch "
                        "(rows 4..0)")
    assert lines[3] == ("First difference at index (0, 0): whole batch has 0x40400000 (3), reversed batch has "
                        "0x00000000 (0)")
    assert lines[4].startswith("Runs that differ from the whole batch: 2 of 3 ")

    def first_row_aware(x):  # wrong only when the launch starts at the row whose first value is 9 (row 3)
        return x + 1 if x[0, 0] == 9 else x

    with pytest.raises(AssertionError) as e:
        assert_batch_invariant(first_row_aware, x, splits=[3, 2])
    lines = _lines(e)
    assert lines[1] == ("Row 3 of 5 (batch_dim=0) changes with the rows launched with it: in the split 2 of 2 (rows "
                        "3..4, with 1 other row(s))")
    assert lines[3] == ("First difference at index (3, 0): whole batch has 0x41100000 (9), split 2 of 2 has "
                        "0x41200000 (10)")


def test_the_output_whose_differing_row_is_lowest_is_reported_first(x):
    def two(x):  # a launch of 3 rows changes row 1 of the first output and row 0 of the second
        a, b = x.clone(), x.clone()
        if x.shape[0] == 3:
            a[1] += 1
            b[0] += 1
        return a, b

    with pytest.raises(AssertionError) as e:
        assert_batch_invariant(two, x, splits=[2, 3])
    assert _lines(e)[1:5] == [
        "Row 2 of 5 (batch_dim=0) changes with the rows launched with it: in the split 2 of 2 (rows 2..4, with 2 "
        "other row(s))",
        "Output 'return[1]': mismatched elements: 3 / 9 (33.3%)",
        "First difference at index (2, 0): whole batch has 0x40c00000 (6), split 2 of 2 has 0x40e00000 (7)",
        "Also differs: output 'return[0]' (3 / 9 elements differ)",
    ]


def test_a_host_side_drift_fails_determinism_naming_the_runs(x):
    with pytest.raises(AssertionError) as e:
        assert_deterministic(Drifting(), x, repeats=4)
    assert _lines(e) == [
        "Results are not deterministic! (fn=Drifting)",
        "Runs that differ from run 1: 2 of 3 (3, 4)",
        "Output 'return': mismatched elements: 1 / 15 (6.7%)",
        "First difference at index (1, 2): run 1 has 0x41200000 (10), run 3 has 0x41200001 (10.000001)",
        "Rule: 4 runs of the same call are the same bit for bit (NaN payloads and the sign of zero included)",
    ]


def test_nan_payloads_and_signed_zeros_are_differences(device):
    words = iter([0x7FC00000, 0x7FFFFFFF])

    def nan():
        return torch.tensor([next(words)], dtype=torch.int32, device=device).view(torch.float32)

    with pytest.raises(AssertionError, match=r"run 1 has 0x7fc00000 \(nan\), run 2 has 0x7fffffff \(nan\)"):
        assert_deterministic(nan, repeats=2)
    signs = iter([0.0, -0.0])
    with pytest.raises(AssertionError, match=r"run 1 has 0x00000000 \(0\), run 2 has 0x80000000 \(-0\)"):
        assert_deterministic(lambda: torch.tensor([next(signs)], device=device), repeats=2)
    assert_deterministic(lambda: torch.full((3,), float("nan"), device=device), repeats=2)  # the same NaN: equal


def test_outputs_are_named_and_a_shape_change_is_a_difference(device):
    calls = iter(range(10))

    def pair():
        i = next(calls)
        return {"a": torch.zeros(2, device=device), "b": (torch.zeros(3, device=device), torch.full((3,), float(i > 1),
                                                                                                   device=device))}

    with pytest.raises(AssertionError) as e:
        assert_deterministic(pair, repeats=3)
    assert _lines(e)[2] == "Output \"return['b'][1]\": mismatched elements: 3 / 3 (100.0%)"
    sizes = iter([2, 3])
    with pytest.raises(AssertionError, match=r"Output 'return': run 1 gave \(\(2,\), torch.float32\), run 2 gave "
                                             r"\(\(3,\), torch.float32\); they cannot be compared bit for bit"):
        assert_deterministic(lambda: torch.zeros(next(sizes), device=device), repeats=2)


def test_a_buffer_returned_again_is_compared_as_it_was(device):
    """The function returns the same tensor each call and changes it: run 1's bits are kept, not the buffer."""
    buf = torch.zeros(4, device=device)

    def bump():
        buf.add_(1.0)
        return buf

    with pytest.raises(AssertionError, match="run 1 has 0x3f800000 \\(1\\), run 2 has 0x40000000 \\(2\\)"):
        assert_deterministic(bump, repeats=2)


@pytest.mark.gpu
def test_a_float_atomic_sum_is_not_deterministic_on_the_gpu(device):
    """Thousands of blocks add their partial sums to one float in the order they finish; on an H100 the order
    changes between launches (the reason DeepGEMM tests determinism). The partials summed in index order are
    deterministic."""
    g = torch.Generator(device="cpu").manual_seed(0)
    x = (torch.randn(1 << 22, generator=g) * torch.logspace(-4, 4, 1 << 22)).to(device)
    assert_deterministic(lambda: total(x, atomic=False), repeats=20)
    with pytest.raises(AssertionError, match=r"Results are not deterministic! \(fn=<lambda>\)"):
        assert_deterministic(lambda: total(x, atomic=True), repeats=50)


# --- bad arguments -------------------------------------------------------------------------------------


def test_bad_arguments_of_assert_deterministic_are_named(x):
    with pytest.raises(TypeError, match="fn must be callable, got Tensor"):
        assert_deterministic(x, x)
    for bad in (1, 0, -3, 2.0, True, "20"):
        with pytest.raises(ValueError, match=r"repeats must be an int >= 2 \(run 1 is the reference"):
            assert_deterministic(rows, x, repeats=bad)
    with pytest.raises(TypeError, match=r"fn=<lambda> \(run 1\) returned return, which is a float; expected a tensor"):
        assert_deterministic(lambda: 1.0)
    with pytest.raises(TypeError, match=r"fn=<lambda> \(run 1\) returned None; expected a tensor"):
        assert_deterministic(lambda: None)
    with pytest.raises(TypeError, match=r"returned return\[1\], which is a str; expected a tensor"):
        assert_deterministic(lambda: (x, "x"))
    with pytest.raises(TypeError, match=r"returned no tensor"):
        assert_deterministic(lambda: ())
    with pytest.raises(TypeError, match=r"returned return, which is a meta tensor"):
        assert_deterministic(lambda: torch.empty(2, device="meta"))
    with pytest.raises(TypeError, match=r"complex dtype torch.complex64; compare its torch.view_as_real"):
        assert_deterministic(lambda: torch.zeros(2, dtype=torch.complex64))


def test_bad_arguments_of_assert_batch_invariant_are_named(x):
    with pytest.raises(TypeError, match="fn must be callable"):
        assert_batch_invariant(None, x)
    for call in (lambda: assert_batch_invariant(rows, x, msg=123), lambda: assert_deterministic(rows, x, msg=123)):
        with pytest.raises(TypeError, match="msg must be a str, a callable taking the failure text, or None, got int"):
            call()
    with pytest.raises(TypeError, match=r"x must be a tensor, or a non-empty tuple/list/dict of tensors .*got list"):
        assert_batch_invariant(rows, [])
    with pytest.raises(TypeError, match=r"x must be a tensor.*got int"):
        assert_batch_invariant(rows, 3)
    with pytest.raises(TypeError, match=r"x\[1\] is a int; expected a tensor"):
        assert_batch_invariant(rows, (x, 3))
    with pytest.raises(TypeError, match=r"x: key 1 is not an argument name \(fn is called with \*\*x\)"):
        assert_batch_invariant(rows, {1: x})
    with pytest.raises(TypeError, match=r"x\['x'\] is a torch.sparse_coo tensor; expected a dense tensor"):
        assert_batch_invariant(rows, {"x": x.to_sparse()})
    with pytest.raises(ValueError, match=r"x is 0-dim: it has no batch_dim"):
        assert_batch_invariant(rows, x[0, 0])
    with pytest.raises(ValueError, match=r"batch_dim=2 is out of range for x of shape \(5, 3\) \(expected -2 <= "):
        assert_batch_invariant(rows, x, batch_dim=2)
    with pytest.raises(TypeError, match="batch_dim must be an int, got float"):
        assert_batch_invariant(rows, x, batch_dim=0.0)
    with pytest.raises(ValueError, match=r"disagree on their rows along batch_dim=0: \{'x\[0\]': 5, 'x\[1\]': 4\}"):
        assert_batch_invariant(lambda a, b: a, (x, x[:4]))
    with pytest.raises(ValueError, match=r"x has 1 row\(s\) along batch_dim=0; batch invariance needs at least 2"):
        assert_batch_invariant(rows, x[:1])
    with pytest.raises(ValueError, match=r"splits must cover the 5 rows of x along batch_dim=0 exactly; \[2, 2\] "
                                         r"sums to 4"):
        assert_batch_invariant(rows, x, splits=[2, 2])
    with pytest.raises(ValueError, match=r"splits must be row counts >= 1, got 0 in \[5, 0\]"):
        assert_batch_invariant(rows, x, splits=[5, 0])
    with pytest.raises(TypeError, match="splits must be a non-empty sequence of row counts summing to 5, got int"):
        assert_batch_invariant(rows, x, splits=5)
    with pytest.raises(TypeError, match=r"returned return, which is a str; expected a tensor"):
        assert_batch_invariant(lambda x: "y", x)


def test_a_function_that_is_not_row_wise_is_refused(x):
    with pytest.raises(ValueError, match=r"output 'return' of the whole batch has shape \(3,\); expected 5 rows along "
                                         r"batch_dim=0, one per row of x"):
        assert_batch_invariant(lambda x: x.sum(0), x)
    with pytest.raises(ValueError, match=r"output 'return' of the split 1 of 5 has shape \(1, 2\) and dtype "
                                         r"torch.float32; the whole batch's rows suggest \(1, 3\)"):
        assert_batch_invariant(lambda x: x[:, :3] if len(x) == 5 else x[:, :2], x)
    with pytest.raises(ValueError, match=r"returned outputs \['return\[0\]'\] for the split 1 of 5, \['return\[0\]', "
                                         r"'return\[1\]'\] for the whole batch"):
        assert_batch_invariant(lambda x: (x, x) if len(x) == 5 else (x,), x)
