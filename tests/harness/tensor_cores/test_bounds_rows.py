"""Tolerance rows that cite a derived bound ("derived: ..." in their note) hold the value
:func:`harness.tensor_cores.error_bound` gives, rounded up to two significant digits: a row cannot drift from its
derivation, and no row claims one that is not checked here (every such row must be in :data:`DERIVED`).

Why the number is stored in the row and recomputed here (rather than a ``derived = ...`` key resolved at lookup):
a row stays a plain number that any reader of the TOML sees, and the derivation is in one place, this file.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal

import pytest
import torch

from harness import tolerances
from harness.tensor_cores import error_bound

_U = 2.0 ** -24


def _gamma(n: int) -> float:
    return n * _U / (1 - n * _U)


def _kernel_bound(key: str, arch: str, *, heads: int, head_dim: int) -> tuple[float, float, str]:
    """(coefficient of S, absolute term, the dot's bound note) of ``|kernel logits - exact| <= atol + rtol * S``:
    the kernel's tl.dot on ``arch`` (the tiles are 128 x 8 warps for FP8, 64 x 4 warps for bf16: warpgroup tiles,
    wgmma on sm90, tcgen05.mma kind::f8f6f4 / kind::f16 on sm100) and its fp32 head sum."""
    fmt = {"e4nv": "e4m3", "bf16": "bf16"}[key]
    K = max(32 if key == "e4nv" else 16, 1 << (head_dim - 1).bit_length())  # D_PAD, as _launch_args pads it
    eb = error_bound(arch, fmt, fmt, K, instr="tcgen05" if arch == "sm100" else "wgmma")
    gh = _gamma(heads - 1)
    return eb.alpha + gh * (1 + eb.alpha), heads * eb.atol * (1 + gh), eb.note.split(" (")[0]


def qsa_logits_bound(key: str, *, heads: int, head_dim: int, arch: str = "sm90") -> tuple[float, float, str]:
    """(rtol, atol, what it is derived from) of ``|kernel logits - fp32 reference| <= atol + rtol * S``.

    Kernel (kernels/qsa/logits.py): per head one ``tl.dot`` of length ``K = D_PAD`` on ``arch``'s tensor cores
    (sm90 wgmma; sm100 tcgen05.mma, prefill and decode alike: kernels compiled for cuda:100 with Triton 3.6 and 3.9,
    harness.tensor_cores.tcgen05.LOWERING), so ``|s_h - exact| <= alpha S_h + t``; ReLU is
    1-Lipschitz; the fp32 sum over heads errs by at most ``gamma_{H-1}`` of ``sum_h relu(s_h) <= (1 + alpha) S``.
    Reference (kernels/qsa/reference.py): fp32 ``bmm`` of length ``head_dim`` in any order (``gamma_D S_h``), ReLU,
    fp32 sum over heads (``gamma_{H-1}``); its products are exact (FP8 and bf16 significands fit fp32's) and each
    rounding below fp32's normal range errs by at most 2^-149 more. S is rounded once to fp32 (factor ``1 - u``,
    with u again for its float64 sum). Operands are taken as normal: a product with a subnormal operand aligns as
    ``|a|~ |b|~`` (harness.tensor_cores.bounds), which S does not see, so the row assumes such a product never sets
    its block's alignment; the interpreter lane computes the same model, so a breach would fail there first."""
    K = max(32 if key == "e4nv" else 16, 1 << (head_dim - 1).bit_length())
    kr, ka, what = _kernel_bound(key, arch, heads=heads, head_dim=head_dim)
    gh, gd = _gamma(heads - 1), _gamma(head_dim)
    rtol = (kr + gd + gh * (1 + gd)) / (1 - 2 * _U)
    atol = ka + (heads * head_dim + heads) * 2.0 ** -149
    return rtol, atol, f"{what}, K={K}, H={heads}"


def qsa_golden_bound(key: str, *, heads: int, head_dim: int, arch: str, golden: str) -> tuple[float, float, str]:
    """(rtol, atol, what) of ``|logits on arch - the golden's logits (computed on golden)| <= atol + rtol * S``:
    both kernels' bounds against the exact logits (:func:`_kernel_bound`), no reference involved."""
    K = max(32 if key == "e4nv" else 16, 1 << (head_dim - 1).bit_length())
    r1, a1, w1 = _kernel_bound(key, arch, heads=heads, head_dim=head_dim)
    r2, a2, w2 = _kernel_bound(key, golden, heads=heads, head_dim=head_dim)
    return (r1 + r2) / (1 - 2 * _U), a1 + a2, f"{w1} + {w2.removeprefix('derived: ')}, K={K}, H={heads}"


def _round_up(x: float) -> float:
    """x rounded up to two significant digits (the rows' precision), as the float a TOML reader makes of it."""
    if x == 0:
        return 0.0
    d = Decimal(x)
    e = d.adjusted() - 1
    return float(d.scaleb(-e).to_integral_value(ROUND_CEILING).scaleb(e))


#: (op, dtype, arch) -> the derived (rtol, atol, what). QSA: the largest shapes any test applies the rows to
#: (kernels.qsa.inputs LOGITS_SWEEP and LOGITS_SWEEP_GPU: 64 heads x head_dim 128). The interpreter lane computes
#: sm90's tensor cores (harness.interp.dots for the assumed arch), so its rows are the sm90 bound; under
#: --harness-arch=sm100 it computes tcgen05.mma's (the sm100 rows). golden/qsa.logits on sm100: its logits against
#: the H200's golden ones (the golden test's shape: 4 heads x head_dim 64).
DERIVED = {
    (op, key, arch): qsa_logits_bound(key, heads=64, head_dim=128, arch="sm100" if arch == "sm100" else "sm90")
    for op in ("qsa.logits",)
    for key in ("e4nv", "bf16")
    for arch in ("sm90", "interp", "sm100")
} | {
    ("golden/qsa.logits", key, "sm100"): qsa_golden_bound(key, heads=4, head_dim=64, arch="sm100", golden="sm90")
    for key in ("e4nv", "bf16")
}


@pytest.mark.parametrize("row", sorted(DERIVED), ids=["/".join(r) for r in sorted(DERIVED)])
def test_derived_rows_hold_the_derived_value(row):
    rtol, atol, what = DERIVED[row]
    tol = tolerances.lookup(*row)
    assert (tol.op, tol.dtype, tol.arch) == row, f"{row}: the lookup found {tol!r}, not a row of its own"
    assert tol.rtol == _round_up(rtol), f"{tol.origin}: rtol {tol.rtol} != derived {rtol:.4g} rounded up"
    assert tol.atol == _round_up(atol), f"{tol.origin}: atol {tol.atol} != derived {atol:.4g} rounded up"
    assert tol.note.startswith(what), f"{tol.origin}: the note must start {what!r}"


def test_every_row_that_claims_a_derivation_is_checked():
    claimed = {k for k, t in tolerances.rows().items() if "derived:" in (t.note or "")}
    keys = {(t.op, t.dtype, t.arch) for k, t in tolerances.rows().items() if k in claimed}
    assert keys <= set(DERIVED), f"rows citing a derivation this file does not check: {sorted(keys - set(DERIVED))}"


def test_the_qsa_fp8_row_is_dominated_by_the_accumulator():
    """The numbers behind the note: sm90's FP8 accumulator (13 bits, truncated) is 99.9% of the fp8 row; bf16's
    row is mostly the fp32 reference's own worst case (gamma_128 + 2 gamma_63)."""
    rtol8, _, what8 = qsa_logits_bound("e4nv", heads=64, head_dim=128)
    eb8 = error_bound("sm90", torch.float8_e4m3fn, torch.float8_e4m3fn, 128)
    assert what8 == "derived: sm90 fp8 accumulator, K=128, H=64"
    assert eb8.alpha / rtol8 > 0.999
    rtol16, _, _ = qsa_logits_bound("bf16", heads=64, head_dim=128)
    assert error_bound("sm90", "bf16", "bf16", 128).alpha / rtol16 < 0.3


def test_round_up_never_rounds_down():
    for x in (1.6617e-2, 2.015e-5, 1.7e-3, 9.99e-7, 1e-5):
        assert x <= _round_up(x) <= x * 1.1


_LOGITS = sorted(r for r in DERIVED if r[0] == "qsa.logits")


@pytest.mark.parametrize("row", _LOGITS, ids=["/".join(r) for r in _LOGITS])
def test_selection_band_is_within_the_derived_bound(row):
    """The qsa.select rows (measured logit error, the selections' tie band) cannot exceed what the derivation
    allows: a measurement above the worst case would mean the model or the derivation is wrong."""
    op, key, arch = row
    band = tolerances.lookup("qsa.select", key, arch)
    assert (band.op, band.dtype, band.arch) == ("qsa.select", key, arch)
    assert band.rtol <= DERIVED[row][0], f"{band.origin}: rtol {band.rtol} above the derived {DERIVED[row][0]:.3g}"
