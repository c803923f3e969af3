"""harness.names: the one naming table. Every name it gives is the library's own (checked against torch, Triton
and ml_dtypes as installed), no spelling names two formats, and the modules that read it agree with it."""

from __future__ import annotations

import collections

import ml_dtypes
import pytest
import torch

from harness import fp8
from harness.names import NAMES, format_name, names

pytestmark = pytest.mark.lane_independent


@pytest.mark.parametrize("row", list(NAMES.values()), ids=list(NAMES))
def test_each_name_is_the_librarys_own(row):
    tl = pytest.importorskip("triton.language")
    if row.torch is not None and hasattr(torch, row.torch):  # float4 needs a newer torch than some lanes have
        assert isinstance(getattr(torch, row.torch), torch.dtype)
    if row.ml_dtypes is not None:
        assert hasattr(ml_dtypes, row.ml_dtypes), row.ml_dtypes
    if row.triton is not None:
        assert str(getattr(tl, row.triton)) == row.triton_type
    else:
        assert row.triton_type is None
    for spelling in row.spellings():
        assert format_name(spelling) == row.name
        assert format_name(spelling.upper()) == row.name


def test_no_spelling_names_two_formats():
    owners = collections.defaultdict(set)
    for row in NAMES.values():
        for s in row.spellings():
            owners[s].add(row.name)
    assert {s: o for s, o in owners.items() if len(o) > 1} == {}


def test_torch_and_triton_dtypes_resolve():
    tl = pytest.importorskip("triton.language")
    assert format_name(torch.float8_e4m3fn) == "e4nv" and format_name(torch.bfloat16) == "bf16"
    assert format_name(tl.float8e5) == "e5m2" and format_name(tl.pointer_type(tl.float16).element_ty) == "fp16"
    assert names("float8_e4m3fn").spec == "e4m3" and names("e4m3").name == "e4nv"
    with pytest.raises(ValueError, match=r"torch dtype torch.int32 is none of the formats"):
        format_name(torch.int32, "dtype")
    with pytest.raises(ValueError, match=r"^fmt: 'fp33' is none of the formats the harness knows \(fp16, bf16"):
        format_name("fp33")


def test_the_modules_that_read_it_agree():
    from harness.compile.launches import FP8_FORMAT_OF_TYPE
    from harness.tensor_cores.bounds import error_bound

    for name, f in fp8.FORMATS.items():
        row = NAMES[name]
        assert (f.triton_name, f.torch_dtype) == (row.triton, row.torch_dtype)
        for spelling in row.spellings():
            assert fp8.get_format(spelling) is f
        assert FP8_FORMAT_OF_TYPE[row.triton_type] == name
    by_dtype = error_bound("sm90", torch.float8_e4m3fn, torch.float8_e5m2, 64)
    assert error_bound("sm90", "e4nv", "float8e5", 64) == error_bound("sm90", "e4m3", "e5m2", 64) == by_dtype
    with pytest.raises(ValueError, match="a_dtype must be one of .* got 'e4b15'"):
        error_bound("sm90", "e4b15", "e5m2", 64)


def test_dtype_short_names_refuse_what_is_no_dtype_or_name():
    """``short_name('bf16')`` answered None, which reads as "a dtype without a short name"; unhashable arguments
    raised a bare "unhashable type"."""
    from harness.dtypes import short_name, torch_dtype

    assert short_name(torch.bfloat16) == "bf16" and short_name(torch.int32) is None
    assert torch_dtype("fp16") is torch.float16
    for bad in ("bf16", [1], None):
        with pytest.raises(TypeError, match=r"^dtype: expected a torch.dtype such as torch.bfloat16; got "):
            short_name(bad)
    for bad in (["bf16"], torch.bfloat16, None):
        with pytest.raises(TypeError, match=r"^name: expected a dtype name, one of fp16, bf16, fp32, fp64; got "):
            torch_dtype(bad)
    with pytest.raises(ValueError, match=r"dtype name 'bf17' is not one of fp16, bf16, fp32, fp64"):
        torch_dtype("bf17")
