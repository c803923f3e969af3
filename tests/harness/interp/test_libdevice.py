"""``libdevice`` on the interpreter lane (:mod:`harness.interp.libdevice`): the stub module mapped to the CUDA one
as the compiler maps it, its modelled symbols run as the ``tl.math`` op with the same sm90 PTX, everything else
refused by name. The raw interpreter returns ``None`` from the stub (``...``) and refuses every extern call."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.language.extra.cuda import libdevice as cuda_libdevice
from triton.language.extra.libdevice import rsqrt as stub_rsqrt

from harness.interp import libdevice as shim
from harness.interp.patch import lift

pytestmark = pytest.mark.interp_only


@triton.jit
def _ld_module(x_ptr, y_ptr, BLOCK: tl.constexpr, FN: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)
    if FN == "rsqrt":
        y = libdevice.rsqrt(x)
    elif FN == "sqrt":
        y = libdevice.sqrt(x)
    elif FN == "exp2":
        y = libdevice.exp2(x)
    elif FN == "log":
        y = libdevice.log(x)
    elif FN == "floor":
        y = libdevice.floor(x)
    elif FN == "trunc":
        y = libdevice.trunc(x)
    elif FN == "rint":
        y = libdevice.rint(x)
    else:
        y = libdevice.pow(x, x)
    tl.store(y_ptr + o, y)


@triton.jit
def _tl_math(x_ptr, y_ptr, BLOCK: tl.constexpr, FN: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)
    if FN == "rsqrt":
        y = tl.math.rsqrt(x)
    elif FN == "sqrt":
        y = tl.sqrt(x)
    elif FN == "exp2":
        y = tl.exp2(x)
    elif FN == "log":
        y = tl.log(x)
    else:
        y = tl.floor(x)
    tl.store(y_ptr + o, y)


@triton.jit
def _ld_imported(x_ptr, y_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(y_ptr + o, stub_rsqrt(tl.load(x_ptr + o)))  # as Liger-Kernel imports it


@triton.jit
def _ld_cuda(x_ptr, y_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(y_ptr + o, cuda_libdevice.rsqrt(tl.load(x_ptr + o)))


def _inputs(n: int = 4096) -> torch.Tensor:
    g = torch.Generator().manual_seed(11)
    x = torch.randn(n, generator=g).abs() * torch.exp2(torch.randint(-20, 20, (n,), generator=g).float())
    x[:6] = torch.tensor([0.0, -0.0, float("inf"), 1e-40, 2.5, -1.5])  # zero, subnormal (flushed), inf
    return x


@pytest.mark.parametrize("fn", ["rsqrt", "sqrt", "exp2", "log", "floor"])
def test_a_modelled_symbol_computes_what_the_tl_math_op_with_the_same_ptx_computes(fn):
    x = _inputs()
    if fn == "exp2":
        x = x.clamp(max=100) * torch.where(torch.arange(x.numel()) % 2 == 0, 1.0, -1.0)
    a, b = torch.empty_like(x), torch.empty_like(x)
    _ld_module[(1,)](x, a, BLOCK=x.numel(), FN=fn)
    _tl_math[(1,)](x, b, BLOCK=x.numel(), FN=fn)
    assert torch.equal(a.view(torch.int32), b.view(torch.int32))


def test_the_approximate_rsqrt_is_the_gpu_model_not_numpy():
    from harness.interp import approx_math

    if not approx_math.installed():
        pytest.skip("the approximate-math shim is not installed in this session")
    x = _inputs()
    y = torch.empty_like(x)
    _ld_module[(1,)](x, y, BLOCK=x.numel(), FN="rsqrt")
    assert torch.equal(y.view(torch.int32), approx_math.rsqrt_approx(x).view(torch.int32))
    # the inputs tell MUFU.RSQ from an IEEE 1/sqrt
    assert not torch.equal(y.view(torch.int32), (1 / torch.sqrt(x)).view(torch.int32))


@pytest.mark.parametrize("fn, ref", [("trunc", torch.trunc), ("rint", torch.round)])
def test_an_exact_instruction_rounds_as_ieee(fn, ref):
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 3.7, -3.7, 1e-40, -0.0, float("inf"), 8388609.0, 0.49999997,
                      -1e-40, 4.5, -5.5, 1e30] * 8)
    y = torch.empty_like(x)
    _ld_module[(1,)](x, y, BLOCK=x.numel(), FN=fn)
    assert torch.equal(y.view(torch.int32), ref(x).view(torch.int32))  # torch.round: half to even, as cvt.rni


def test_each_way_of_naming_it_reaches_the_same_model():
    x = _inputs(1024)
    a, b, c = (torch.empty_like(x) for _ in range(3))
    _ld_module[(1,)](x, a, BLOCK=1024, FN="rsqrt")
    _ld_imported[(1,)](x, b, BLOCK=1024)
    _ld_cuda[(1,)](x, c, BLOCK=1024)
    assert torch.equal(a.view(torch.int32), b.view(torch.int32)) and torch.equal(a.view(torch.int32),
                                                                                 c.view(torch.int32))
    assert _ld_imported.fn.__globals__["stub_rsqrt"] is stub_rsqrt  # the launch's rebinding is undone


def test_an_unmodelled_symbol_is_refused_by_name():
    x = _inputs(64)
    y = torch.empty_like(x)
    with pytest.raises(Exception, match=r"libdevice __nv_powf: the CPU lane has no model"):
        _ld_module[(1,)](x, y, BLOCK=64, FN="pow")


def test_a_non_fp32_argument_is_refused():
    x = _inputs(64).double()
    y = torch.empty_like(x)
    with pytest.raises(Exception, match=r"__nv_rsqrt: .*expected an fp32 argument"):
        _ld_module[(1,)](x, y, BLOCK=64, FN="rsqrt")


def test_the_raw_interpreter_runs_none_of_it():
    x = _inputs(64)
    y = torch.empty_like(x)
    with lift(shim.TAG), pytest.raises(Exception, match="None"):
        _ld_imported[(1,)](x, y, BLOCK=64)
    with lift(shim.TAG), pytest.raises(Exception, match="extern_elementwise not supported|_semantic"):
        _ld_cuda[(1,)](x, y, BLOCK=64)


def test_the_symbols_table_names_only_fp32_libdevice_functions():
    for symbol, (kind, name) in shim.SYMBOLS.items():
        assert symbol.startswith("__nv_") and symbol.endswith("f"), symbol
        assert kind in ("op", "numpy") and name
