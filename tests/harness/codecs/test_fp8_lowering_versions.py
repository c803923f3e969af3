"""The per-(Triton version, target) cast-lowering model (harness.fp8.LOWERINGS) against what each version's
compiler emits and against hand-derived cases.

The installed Triton's PTX for sm80/sm89/sm90 (AOT-compiled here, no GPU) must contain the instructions its row
names, so a Triton release that changes a lowering fails here instead of silently mis-modelling; the 3.6 and 3.9
rows are checked on values that tell them apart (ties, saturation, the two roundings of sm89's old fp32 path).
Until the H200 tables of 3.9 are captured (scripts/capture_fp8_lowering_tables.sh) these are 3.9's evidence.
"""

from __future__ import annotations

import re
import warnings

import pytest
import torch

from harness import fp8
from harness.versions import triton_version

pytestmark = pytest.mark.lane_independent


def _f16(bits: list[int]) -> torch.Tensor:
    return torch.tensor(bits, dtype=torch.int32).to(torch.int16).view(torch.float16)


def test_issue_example_sm89_fp32_e4nv_one_rounding_from_39():
    x = torch.tensor([168.00001525878906])
    assert int(fp8.encode(x, "e4nv", arch="sm89", triton="3.9.0")) == 0x73  # one cvt.rn.satfinite.e4m3x2.f32
    assert int(fp8.encode(x, "e4nv", arch="sm89", triton="3.6.0")) == 0x72  # cvt.rz.f16.f32 -> 168, a tie
    assert int(fp8.encode(x, "e4nv", arch="sm90", triton="3.6.0")) == 0x73


def test_sm80_fp16_e5m2_ties_and_saturation_by_version():
    # 1.125 (0x3c80) is halfway between e5m2 1.0 (0x3c) and 1.25 (0x3d); 1.375 (0x3d80) halfway to 1.5;
    # 60000 (0x7b53) beyond e5m2's max 57344; inf; -NaN (0xfe00)
    h = _f16([0x3C80, 0x3D80, 0x7B53, 0x7C00, 0xFE00])
    assert fp8.encode(h, "e5m2", arch="sm80", triton="3.6").tolist() == [0x3D, 0x3E, 0x7B, 0x7C, 0xFE]
    assert fp8.encode(h, "e5m2", arch="sm80", triton="3.9").tolist() == [0x3C, 0x3E, 0x7B, 0x7B, 0xFF]


def test_sm80_fp32_e5m2_sticky_bit_keeps_one_rounding_on_39():
    # 1.125 + 2^-20: just above the tie; cvt.rz.f16.f32 alone would make it the tie (-> 1.0); the sticky OR
    # of Triton 3.9 keeps it above, so it rounds up as one RNE rounding does
    x = torch.tensor([1.125 + 2.0 ** -20, 1.125, -(1.375 + 2.0 ** -20)])
    assert fp8.encode(x, "e5m2", arch="sm80", triton="3.9").tolist() == [0x3D, 0x3C, 0xBE]
    assert fp8.encode(x, "e5m2", arch="sm80", triton="3.9").tolist() == fp8.encode(x, "e5m2", arch="sm90").tolist()


def test_every_case_has_one_row_with_a_source():
    for v in ("3.6", "3.7", "3.8", "3.9"):
        for cc in (75, 80, 86, 89, 90, 100, 120):
            for src in ("fp16", "bf16", "fp32"):
                for fmt in ("e5m2", "e4b15") + (("e4nv",) if cc >= 89 else ()):
                    row = fp8.lowering_for(src, fmt, cc, triton=v)
                    assert "PTX of Triton" in row.source and "derived 2026-12-04" in row.source


def test_unknown_triton_warns_once_naming_the_nearest_model():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            assert fp8.lowering_version("3.47.0") == (3, 9)
    assert len(caught) == 1 and "Triton 3.47.0" in str(caught[0].message) and "Triton 3.9's" in str(caught[0].message)
    with pytest.warns(RuntimeWarning, match=r"Triton 3\.5\.1 .*the nearest, Triton 3\.6-3\.8's"):
        assert fp8.lowering_version("3.5.1") == (3, 6)


@pytest.mark.parametrize("version, model", [("3.6.0", (3, 6)), ("3.7.1", (3, 7)), ("3.8.0", (3, 8)),
                                            ("3.9.0", (3, 9)), ("3.9.1+git", (3, 9))])
def test_a_modelled_triton_is_its_own_version_without_a_warning(version, model):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fp8.lowering_version(version) == model


#: (target, case) -> the cvt instructions the installed Triton's row implies, by model version
_EXPECTED_CVT = {
    (3, 6): {(89, "fp32", "e4nv"): {"cvt.rz.f16.f32", "cvt.rn.satfinite.e4m3x2.f16x2"},
             (80, "fp32", "e5m2"): {"cvt.rz.f16.f32"}, (90, "fp32", "e4nv"): {"cvt.rn.satfinite.e4m3x2.f32"},
             (80, "bf16", "e5m2"): set()},
    (3, 9): {(89, "fp32", "e4nv"): {"cvt.rn.satfinite.e4m3x2.f32"},
             (80, "fp32", "e5m2"): {"cvt.rz.f16x2.f32"}, (90, "fp32", "e4nv"): {"cvt.rn.satfinite.e4m3x2.f32"},
             (80, "bf16", "e5m2"): {"cvt.f32.bf16", "cvt.rn.f16.f32"}},
}


@pytest.mark.parametrize("cc, src, fmt", sorted(_EXPECTED_CVT[(3, 9)]), ids=lambda v: str(v))
def test_installed_triton_emits_what_its_row_says(cc, src, fmt):
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from harness.cast_probe import fp8_cast
    from harness.interp.jit import as_jit

    v = fp8.lowering_version()
    row = fp8.lowering_for(src, fmt, cc)
    sig = {"x_ptr": f"*{src}", "y_ptr": "*u8", "n": "i32", "DST": "constexpr", "VIA_FP32": "constexpr",
           "BLOCK": "constexpr"}
    tl = pytest.importorskip("triton.language")
    k = triton.compile(ASTSource(as_jit(fp8_cast), sig, constexprs={"DST": getattr(tl, fp8.get_format(fmt).triton_name),
                       "VIA_FP32": False, "BLOCK": 1024}, attrs={(i,): [["tt.divisibility", 16]] for i in range(3)}),
                       target=GPUTarget("cuda", cc, 32))
    cvts = set(re.findall(r"cvt\.[\w.]+", k.asm["ptx"])) - {"cvt.s64.s32"}
    expected = _EXPECTED_CVT[(3, 9) if v >= (3, 9) else (3, 6)][(cc, src, fmt)]
    assert cvts == expected, (f"Triton {triton_version()} sm{cc} {src}->{fmt}: PTX has {sorted(cvts)}, the "
                              f"model's row ({row.to16}, {row.final}; {row.source}) implies {sorted(expected)}")
    if row.final.startswith("sw_e5m2_rne"):
        assert "min.f16x2" in k.asm["ptx"] and "0x7b007b00" in k.asm["ptx"]  # the saturation of 3.9's software


@pytest.mark.parametrize("version", ["banana", "3.x", "", "v3.6"])
def test_a_version_that_is_no_version_is_refused_naming_the_argument(version):
    """A nonexistent version string was mapped to Triton 3.6's model with a warning, as if it were a real one."""
    with pytest.raises(ValueError, match=rf"triton='{re.escape(version)}' is not a Triton version"):
        fp8.lowering_version(version)
    with pytest.raises(ValueError, match=r"triton="):
        fp8.encode(torch.ones(2), "e4nv", arch="sm90", triton=version)
    with pytest.raises(TypeError, match=r"triton must be a version string"):
        fp8.lowering_version(3.6)
