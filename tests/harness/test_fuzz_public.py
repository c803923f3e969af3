"""Fuzzing the public asserts and codecs with bad and edge inputs: each call ends in a correct result (a return, or an
AssertionError from an assert whose comparison failed), or a TypeError / ValueError whose message names an argument
of the call. Nothing else: no other exception, no hang (each call is small), no file written, and no NaN passing an
assert that was not told to accept it.

Bounded and deterministic for CI: 60 derandomized examples per test, a few seconds in all;
``HARNESS_FUZZ_EXAMPLES=2000`` searches longer by hand.
"""

from __future__ import annotations

import inspect
import math
import os
import re
from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import assert_close_tol, assert_fp8_close, assert_fp8_within_one_ulp, assert_topk_multiset_equal, fp8, mx
from harness.mx import assert_mx_close
from harness.tolerances import Tolerance

pytestmark = [pytest.mark.lane_independent, pytest.mark.unreported]

FUZZ = settings(max_examples=int(os.environ.get("HARNESS_FUZZ_EXAMPLES", "60")), deadline=None, derandomize=True,
                database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# ------------------------------------------------------------------------------------------ inputs

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.uint8, torch.int32, torch.bool,
          torch.complex64, torch.float8_e4m3fn, torch.float8_e5m2]
SHAPES = [(), (0,), (3,), (2, 32), (4, 64), (0, 32), (2, 0), (1, 2, 32)]
SPECIALS = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1e-40, 6e4, -448.0]


@st.composite
def tensors(draw: Any) -> Any:
    """A tensor of some dtype, shape and layout, with NaN/inf/-0 sprinkled in; sometimes no tensor at all."""
    kind = draw(st.sampled_from(["tensor"] * 8 + ["meta", "list", "none", "str", "number", "sparse"]))
    if kind == "list":
        return [1.0, 2.0]
    if kind == "none":
        return None
    if kind == "str":
        return "e4nv"
    if kind == "number":
        return draw(st.sampled_from([1.0, math.nan, 0, -1]))
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.sampled_from(SHAPES))
    if kind == "meta":
        return torch.empty(shape, dtype=dtype, device="meta")
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    x = torch.randn(shape, generator=g, dtype=torch.float64) * draw(st.sampled_from([1.0, 1e3, 1e-3]))
    n = x.numel()
    if n and draw(st.booleans()):
        for _ in range(draw(st.integers(1, 3))):
            x.view(-1)[draw(st.integers(0, n - 1))] = draw(st.sampled_from(SPECIALS))
    if dtype in (torch.uint8, torch.int32):
        t = torch.randint(0, 256, shape, generator=g).to(dtype)
    elif dtype == torch.bool:
        t = x > 0
    elif dtype == torch.complex64:
        t = torch.complex(x.float(), x.float())
    else:
        t = x.to(dtype)
    if kind == "sparse" and t.dim() >= 1 and dtype in (torch.float32, torch.float64):
        return t.to_sparse()
    if t.dim() == 2 and t.shape[1] > 1 and draw(st.booleans()):
        t = t.t().contiguous().t()  # the same values, column-major: non-contiguous
    elif t.dim() >= 1 and t.shape[-1] > 2 and draw(st.booleans()):
        t = t[..., ::2]  # strided
    return t


FORMATS = st.sampled_from(["e4nv", "e5m2", "e4b15", "e4m3fnuz", "bogus", "", None, 5, torch.float8_e4m3fn,
                           torch.float32])
TOLS = st.sampled_from([Tolerance(), Tolerance(rtol=1e-2, atol=1e-3), Tolerance(max_ulp=1),
                        Tolerance(max_ulp=2, max_mismatch=0.5), None, 0.5, "tight", math.nan])
FLAGS = st.sampled_from([True, False, None, "yes", 1])

# ------------------------------------------------------------------------------------------ the judge


def _names(fn: Callable[..., Any]) -> set[str]:
    """The arguments of ``fn`` a message may name (``kwargs`` and ``self`` are none)."""
    return set(inspect.signature(fn).parameters) - {"kwargs", "args", "self"}


def _has_nan(v: Any) -> bool:
    if not isinstance(v, torch.Tensor) or v.device.type == "meta" or v.layout != torch.strided:
        return False
    if v.dtype in fp8.FORMAT_OF_DTYPE:
        return bool(fp8.is_nan_code(v.view(torch.uint8), fp8.FORMAT_OF_DTYPE[v.dtype]).any())
    return bool(v.is_floating_point() and torch.isnan(v.float()).any())


def judge(fn: Callable[..., Any], *args: Any, nan_asked: bool = True, **kwargs: Any) -> Any:
    """Call ``fn``; the outcome must be a return, an AssertionError from an assert (``nan_asked`` False: NaN in an
    input must not pass), or a TypeError / ValueError naming one of ``fn``'s arguments."""
    before = set(os.listdir("."))
    try:
        out = fn(*args, **kwargs)
    except AssertionError:
        if not fn.__name__.startswith("assert_"):
            raise
        out = None
    except (TypeError, ValueError) as e:
        text = str(e)
        named = [n for n in _names(fn) if re.search(rf"\b{re.escape(n)}\b", text)]
        assert named, f"{fn.__name__}: {type(e).__name__} names no argument: {text!r}"
        out = None
    else:
        if fn.__name__.startswith("assert_") and not nan_asked:
            assert not any(_has_nan(v) for v in (*args, *kwargs.values())), f"{fn.__name__}: NaN passed unasked"
    assert set(os.listdir(".")) == before, f"{fn.__name__} wrote a file"
    return out


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


# ------------------------------------------------------------------------------------------ the asserts


@FUZZ
@given(a=tensors(), e=tensors(), tol=TOLS, equal_nan=FLAGS, scale=st.sampled_from([None, 1.0, -1.0, math.nan, "s"]))
def test_assert_close_tol(a, e, tol, equal_nan, scale):
    judge(assert_close_tol, a, e, tol, equal_nan=equal_nan, scale=scale, nan_asked=equal_nan is True)


@FUZZ
@given(a=tensors(), e=tensors(), fmt=FORMATS, max_ulp=st.sampled_from([0, 1, 300, -1, 1.5, None]),
       nan_equal=FLAGS, same=st.booleans())
def test_assert_fp8_close(a, e, fmt, max_ulp, nan_equal, same):
    e = a if same else e
    judge(assert_fp8_close, a, e, fmt, max_ulp=max_ulp, nan_equal=nan_equal, nan_asked=nan_equal is True)
    judge(assert_fp8_within_one_ulp, a, e, fmt, nan_equal=nan_equal, nan_asked=nan_equal is True)


@FUZZ
@given(idx=tensors(), scores=tensors(), k=st.sampled_from([0, 1, 2, 64, -1, 1.5]), tol=TOLS)
def test_assert_topk_multiset_equal(idx, scores, k, tol):
    judge(assert_topk_multiset_equal, idx, scores, k=k, tol=tol)


SCHEMES = st.sampled_from(["mxfp4", "nvfp4", "mxfp8e4m3", "mxfp6e2m3", "mxfp9", None])


@st.composite
def quantized(draw: Any) -> tuple[Any, str]:
    """A quantized tuple of some scheme, maybe damaged: NaN/255 scales, NaN codes, NaN/inf global, wrong parts."""
    name = draw(st.sampled_from(["mxfp4", "nvfp4", "mxfp8e4m3", "mxfp6e2m3"]))
    rows = draw(st.sampled_from([0, 1, 4]))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    q = list(mx.SCHEMES[name].quantize(torch.randn(rows, 64, generator=g)))
    damage = draw(st.sampled_from(["none", "nan-scale", "nan-code", "global", "drop", "float-codes", "shape"]))
    if damage == "nan-scale" and q[1].numel():
        q[1] = q[1].clone()
        q[1].view(-1)[0] = 0xFF if name != "nvfp4" else 0x7F
    elif damage == "nan-code" and q[0].numel() and name == "mxfp8e4m3":
        q[0] = q[0].clone()
        q[0].view(-1)[0] = 0x7F
    elif damage == "global" and name == "nvfp4":
        q[2] = torch.tensor(draw(st.sampled_from([math.nan, math.inf, -1.0, 0.0])))
    elif damage == "drop":
        q = q[:1]
    elif damage == "float-codes":
        q[0] = q[0].float()
    elif damage == "shape" and q[1].numel():
        q[1] = q[1][..., :1]
    return tuple(q), name


@FUZZ
@given(a=quantized(), e=quantized(), scheme=SCHEMES, same=st.booleans(), nan_equal=FLAGS,
       layout=st.sampled_from(["linear", "swizzled", "tiled", None]), scale_ulp=st.sampled_from([0, 2, -1, "x"]))
def test_assert_mx_close(a, e, scheme, same, nan_equal, layout, scale_ulp):
    qa, name = a
    qe = qa if same else e[0]
    judge(assert_mx_close, qa, qe, scheme if scheme != "mxfp4" else name, nan_equal=nan_equal, layout=layout,
          scale_ulp=scale_ulp, nan_asked=nan_equal is True)


# ------------------------------------------------------------------------------------------ the codecs


@FUZZ
@given(x=tensors(), fmt=FORMATS, arch=st.sampled_from([None, "sm90", "sm80", "interp", "sm91", 90]),
       triton=st.sampled_from([None, "3.6.0", "3.9.0", "banana", 3.6]))
def test_fp8_codecs(x, fmt, arch, triton):
    codes = judge(fp8.encode, x, fmt, arch=arch, triton=triton)
    if codes is not None:
        assert codes.shape == x.shape
        values = judge(fp8.decode, codes, fmt)
        assert values is not None and values.shape == x.shape
    judge(fp8.decode, x, fmt)


MX_FORMATS = st.sampled_from(["e2m1", "e2m3", "e3m2", "e8m0", "ue4m3", torch.float8_e4m3fn, "e4m3", "bogus", None])


@FUZZ
@given(x=tensors(), fmt=MX_FORMATS, block=st.sampled_from([32, 16, 0, 3, -1]), pad=st.booleans(),
       rule=st.sampled_from(["floor", "rceil", "nope", None]), axis=st.sampled_from([-1, 0, 5]))
def test_mx_codecs(x, fmt, block, pad, rule, axis):
    q = judge(mx.quantize_mx, x, fmt, block=block, pad=pad, scale_rule=rule, axis=axis)
    if q is not None:
        back = judge(mx.dequantize_mx, q[0], q[1], fmt, block=block, axis=axis)
        assert back is not None
    judge(mx.quantize_nvfp4, x, block=block if block != 32 else 16, pad=pad, axis=axis)
    judge(mx.encode, x, fmt)
    judge(mx.decode, x, fmt)
    judge(mx.unpack_fp4, x)
    judge(mx.pack_fp4, x)
    judge(mx.swizzle_scales, x)
