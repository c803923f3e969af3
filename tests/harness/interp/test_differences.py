"""harness.interp.differences: what no shim models, as data the shims clear through the patch layer, so a modelled
op stops warning whichever shim was installed first, and warns again when its shim is lifted."""

from __future__ import annotations

import warnings

import pytest

from harness.interp import approx_math, differences
from harness.interp.patch import Patch, lift

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


@triton.jit
def _div(x_ptr, y_ptr, o_ptr, BLOCK: tl.constexpr):
    off = tl.arange(0, BLOCK)
    tl.store(o_ptr + off, tl.load(x_ptr + off) / tl.load(y_ptr + off))


def _fdiv_warnings() -> list[str]:
    import torch

    x, y = torch.rand(8) + 1, torch.rand(8) + 1
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _div[(1,)](x, y, torch.empty(8), BLOCK=8)
    return [str(w.message) for w in seen if "interpreter op fdiv on fp32 in kernel _div" in str(w.message)]


def test_reason_prefers_the_exact_row_and_a_modelled_row_is_none():
    table = differences.KNOWN_DIFFERENT
    before = dict(table)
    assert differences.reason("create_dot", "int8") == table[("create_dot", "*")]
    assert differences.reason("create_fadd", "fp32") is None  # no row at all
    with Patch.context() as patch:
        differences.mark_modelled(patch, "dots", "create_dot", ("fp16",))
        assert differences.reason("create_dot", "fp16") is None
        assert differences.reason("create_dot", "int8") == table[("create_dot", "*")]
        with lift("dots"):
            assert differences.reason("create_dot", "fp16") == table[("create_dot", "*")]
    assert table == before


@pytest.mark.interp_only
@pytest.mark.parametrize("order", ["math first", "warnings first"])
def test_a_modelled_op_stops_warning_whatever_the_install_order(order):
    with lift(differences.TAG, approx_math.TAG):  # the session's own, out of the way
        assert len(_fdiv_warnings()) == 0  # no warnings installed: silent
        with Patch.context() as patch:
            steps = [lambda: approx_math.install(patch), lambda: differences.install(patch)]
            for step in steps if order == "math first" else steps[::-1]:
                assert step()
            assert _fdiv_warnings() == []
            with approx_math.suspended():  # the interpreter divides exactly again: that is what it warns about
                got = _fdiv_warnings()
            assert len(got) == 1 and "div.full.f32" in got[0], got


@triton.jit
def _atomic_fadd(x_ptr, acc_ptr, iacc_ptr):
    tl.atomic_add(acc_ptr, tl.load(x_ptr + tl.program_id(0)))


@triton.jit
def _atomic_xchg(x_ptr, acc_ptr, iacc_ptr):
    tl.atomic_xchg(iacc_ptr, tl.load(x_ptr + tl.program_id(0)).to(tl.int32))


@triton.jit
def _atomic_cas(x_ptr, acc_ptr, iacc_ptr):
    tl.atomic_cas(iacc_ptr, 0, tl.load(x_ptr + tl.program_id(0)).to(tl.int32))


@triton.jit
def _atomic_iadd(x_ptr, acc_ptr, iacc_ptr):
    tl.atomic_add(iacc_ptr, tl.load(x_ptr + tl.program_id(0)).to(tl.int32))


@triton.jit
def _atomic_imax(x_ptr, acc_ptr, iacc_ptr):
    tl.atomic_max(iacc_ptr, tl.load(x_ptr + tl.program_id(0)).to(tl.int32))


# one kernel per case: the warning is given once per kernel, op and dtype in a session
_ATOMICS = {"fadd": _atomic_fadd, "xchg": _atomic_xchg, "cas": _atomic_cas, "iadd": _atomic_iadd,
            "imax": _atomic_imax}


@pytest.mark.interp_only
@pytest.mark.parametrize("op, ordered", [("fadd", True), ("xchg", True), ("cas", True), ("iadd", False),
                                         ("imax", False)])
def test_an_atomic_whose_result_depends_on_the_programs_order_warns(op, ordered):
    import torch

    x = torch.tensor([1.0, 1e8, -1e8, 3.0])
    kernel = _ATOMICS[op]

    def launch() -> list[str]:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            kernel[(4,)](x, torch.zeros(1), torch.zeros(1, dtype=torch.int32))
        return [str(w.message) for w in seen if "atomic_order" in str(w.message)]

    with lift(differences.TAG):
        assert launch() == []  # the warnings lifted: silent
    got = launch()
    assert len(got) == (1 if ordered else 0), got  # once per kernel, however many programs
    if ordered:
        assert "changes from run to run" in got[0] and kernel.__name__ in got[0], got
