"""harness.interp.approx_math on its own: the tables' provenance, the fma emulation the libdevice logs rest
on, and the interpreter shim's install / pass-through / uninstall. (Bit-exactness against the H200 is
test_approx_math_h200.py; the proof on a quant kernel is tests/kernels/group_quant.)"""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest
import torch

from harness.interp import approx_math as am
from harness.interp.patch import Patch
from tests.harness._exact import round_f32

pytestmark = pytest.mark.lane_independent


@pytest.mark.parametrize("name", ["rcp", "sqrt", "rsqrt", "ex2"])
def test_tables_reconstruct_the_h200_values(name):
    # the stored int8 diffs are relative to fp64 references computed here; the checksum is of the H200's values
    meta = am.table_meta()
    assert meta["device"] == "NVIDIA H200" and meta["capability"] == [9, 0]
    assert am.values_checksum(am._values(name, "cpu")) == meta["checksums"][name]


def test_table_file_stays_small():
    assert am.TABLE_FILE.stat().st_size < 2_000_000


def _exact_fma(a, b, c):
    v = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    return np.float32(torch.tensor(float(v), dtype=torch.float64).float().item()) if v == 0 else round_f32(v)


def test_fma_ftz_is_one_rounding():
    r = random.Random(7)
    vals = []
    for _ in range(3000):
        a, b = (np.float32(r.uniform(-4, 4) * 2.0 ** r.randint(-20, 20)) for _ in range(2))
        c = np.float32(-float(a) * float(b) * (1 + r.choice([0, 2.0**-24, -(2.0**-25), 3e-8])))  # near-cancelling
        vals.append((a, b, c))
    a, b, c = (torch.tensor([v[i] for v in vals], dtype=torch.float32) for i in range(3))
    got = am.fma_ftz(a, b, c)
    want = torch.tensor([_exact_fma(*v) for v in vals], dtype=torch.float32)
    want = torch.where(want.abs() < 2.0**-126, torch.copysign(torch.zeros_like(want), want), want)
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))
    # 1 + 2^-23 + 2^-24 - 2^-60: below the fp32 midpoint; an fp64 sum rounds it onto the midpoint (-> even)
    a, b = torch.tensor([2.0**-12 * (1 + 2.0**-18)]), torch.tensor([2.0**-12 * (1 - 2.0**-18)])
    c = torch.tensor([1 + 2.0**-23])
    assert am.fma_ftz(a, b, c).item() == 1 + 2.0**-23
    assert (a.double() * b.double() + c.double()).float().item() == 1 + 2.0**-22


def test_div_full_scaling_paths():
    x = torch.tensor([3.0, 3e-30, 1.0, 0.0, 1.0, 5e-39, float("inf")])
    y = torch.tensor([2.0**127, 1e-39, 0.0, 0.0, float("inf"), 3e38, float("inf")])
    got = am.div_full(x, y)
    assert got[0].item() == pytest.approx(3 * 2.0**-127, rel=2**-22)  # |y| > 2^126: both scaled by 1/4
    assert got[1].item() == pytest.approx(3e9, rel=2**-22)  # subnormal y: both scaled by 2^24
    assert got[2].item() == float("inf") and torch.isnan(got[3]) and got[4].item() == 0.0
    assert got[5].item() == 0.0  # 2^-126 > quotient: FMUL rounds it, not flushed
    assert torch.isnan(got[6])


def test_div_full_operands_numpy_is_the_torch_model():
    """The numpy evaluation the lowering shim uses is :func:`div_full_operands`, bit for bit: random bit patterns
    (subnormals, inf, NaN), wide-range normals, every pair of edge values, and 0-d operands."""
    rng = np.random.default_rng(11)
    bits = rng.integers(0, 2**32, 50_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(over="ignore"):  # beyond fp32: inf
        wide = (rng.standard_normal(50_000) * 2.0 ** rng.integers(-140, 128, 50_000)).astype(np.float32)
    edge = np.array([0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, 2.0**-126, 2.0**-127, 2.0**126,
                     2.0**127, 3.4e38, 1, -1, 3, 1000], np.float32)
    cases = [(bits, wide), (wide, bits), (np.repeat(edge, edge.size), np.tile(edge, edge.size)),
             (np.array(3.0, np.float32), np.array(1000.0, np.float32)), (np.ones(5, np.float32), np.float32(7.0))]
    for x, y in cases:
        xs, r = am.div_full_operands(*(torch.from_numpy(np.array(v, np.float32)) for v in (x, y)))
        xs2, r2 = am.div_full_operands_numpy(x, y)
        assert xs2.shape == tuple(xs.shape) and r2.shape == tuple(r.shape)
        assert np.array_equal(xs2.view(np.int32), xs.numpy().view(np.int32))
        assert np.array_equal(r2.view(np.int32), r.numpy().view(np.int32))


def test_shim_routes_fp32_only_and_undoes():
    from triton.runtime import interpreter as itp

    cls = itp.InterpreterBuilder
    before = {n: cls.__dict__.get(n) for n in am.SHIMMED}
    with Patch.context() as patch:
        assert am.install(patch)
        assert am.installed()
        b = cls.__new__(cls)
        x = itp.TensorHandle(np.array([1.0, 3.0, 7.0], dtype=np.float32), _tl_type("float32"))
        y = itp.TensorHandle(np.array([3.0, 7.0, 9.0], dtype=np.float32), _tl_type("float32"))
        got = b.create_fdiv(x, y).data
        assert np.array_equal(got, am.div_full(torch.from_numpy(x.data), torch.from_numpy(y.data)).numpy())
        assert not np.array_equal(got, x.data / y.data)  # 1/3, 3/7, 7/9: div.full rounds some differently
        d = itp.TensorHandle(np.array([1.0, 3.0], dtype=np.float64), _tl_type("float64"))
        assert np.array_equal(b.create_fdiv(d, d).data, np.ones(2))  # fp64: the interpreter's own
        with am.suspended():
            assert not am.installed()
            assert np.array_equal(b.create_fdiv(x, y).data, x.data / y.data)
        assert am.installed()
    assert {n: cls.__dict__.get(n) for n in am.SHIMMED} == before


def _tl_type(name):
    import triton.language as tl

    return getattr(tl, name)


def test_applies_to_nvidia_and_interp_not_amd():
    from harness.arch import parse_arch

    assert am.applies_to(parse_arch("sm90")) and am.applies_to(parse_arch("sm80"))
    assert not am.applies_to(parse_arch("gfx942"))
