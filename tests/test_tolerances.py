"""The (op, dtype, arch) table: fallback order, defaults, TOML rows, errors."""

import pytest

from harness import tolerances
from harness.tolerances import Tolerance, load_toml, lookup, register


@pytest.fixture(autouse=True)
def _clean_table():
    saved = tolerances.rows()
    yield
    tolerances._TABLE.clear()
    tolerances._TABLE.update(saved)


def test_defaults_mirror_torch_testing():
    assert (lookup("anything", "bf16", "sm90").rtol, lookup("anything", "bf16", "sm90").atol) == (1.6e-2, 1e-5)
    assert lookup("x", "fp16", "interp").rtol == 1e-3
    assert lookup("x", "fp32", "sm80").rtol == 1.3e-6


def test_fp8_casts_exact_on_hardware_and_interp_model():
    assert lookup("fp8_cast", "bf16-e4nv", "sm90").max_ulp == 0
    assert lookup("fp8_cast", "fp16-e4b15", "interp").max_ulp == 0


def test_fallback_arch_then_family_then_kind():
    register("op", "bf16", "sm80", Tolerance(atol=1.0))
    register("op", "bf16", "cuda", Tolerance(atol=2.0))
    assert lookup("op", "bf16", "sm86").atol == 1.0  # family
    assert lookup("op", "bf16", "sm86").key == "op/bf16/sm80"
    assert lookup("op", "bf16", "sm90").atol == 2.0  # kind
    register("op", "bf16", "sm86", Tolerance(atol=3.0))
    assert lookup("op", "bf16", "sm86").atol == 3.0  # exact wins


def test_case_id_falls_back_to_source_dtype():
    register("op2", "bf16", "*", Tolerance(atol=4.0))
    assert lookup("op2", "bf16-e4nv", "sm90").atol == 4.0
    register("op2", "bf16-e4nv", "*", Tolerance(atol=5.0))
    assert lookup("op2", "bf16-e4nv", "sm90").atol == 5.0


def test_op_beats_wildcard_op_even_at_a_looser_arch():
    register("op3", "*", "*", Tolerance(atol=7.0))
    assert lookup("op3", "bf16", "sm90").atol == 7.0


def test_missing_key_lists_what_was_tried():
    tolerances._TABLE.clear()
    with pytest.raises(KeyError, match=r"no tolerance row for op='k' dtype='e4nv' arch='sm86'; tried: k/e4nv/sm86"):
        lookup("k", "e4nv", "sm86")


def test_repr_is_approx_style():
    t = lookup("x", "bf16", "sm90")
    assert repr(t) == "Tolerance(rtol=1.6e-02, atol=1.0e-05) [*/bf16/*]"
    assert repr(Tolerance(max_ulp=1, ulp_floor=2**-9)) == "Tolerance(max_ulp=1, ulp_floor=2.0e-03)"


@pytest.mark.parametrize(
    "kwargs, match",
    [({"rtol": -1}, "rtol must be a finite number >= 0"), ({"atol": float("nan")}, "atol must be"),
     ({"max_ulp": -1}, "max_ulp must be an int >= 0"), ({"max_mismatch": 2.0}, "fraction in"),
     ({"max_ulp": 1.5}, "max_ulp must be an int")],
)
def test_tolerance_validates(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Tolerance(**kwargs)


def test_override_marks_key():
    t = lookup("x", "bf16", "sm90").with_(rtol=0.5)
    assert t.rtol == 0.5 and t.key == "*/bf16/*+override"
    with pytest.raises(TypeError, match="unknown Tolerance field"):
        t.with_(rtl=1)


def test_toml_rows(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text('[[tolerance]]\nop = "my.op"\ndtype = "bf16"\narch = "sm_90"\nrtol = 0.25\nnote = "measured"\n')
    assert load_toml(f) == 1
    t = lookup("my.op", "bf16", "sm90")
    assert (t.rtol, t.key, t.note) == (0.25, "my.op/bf16/sm90", "measured")


@pytest.mark.parametrize(
    "body, match",
    [('[[tolerance]]\nop = "a"\ndtype = "bf16"\n', "missing arch"),
     ('[[tolerance]]\nop = "a"\ndtype = "bf16"\narch = "*"\nrtool = 1\n', "unknown field"),
     ('[[tolerance]]\nop = "a"\ndtype = "bf16"\narch = "*"\natol = -1\n', "row 1: Tolerance.atol"),
     ('[[tolerance]\n', "invalid TOML"),
     ('[[tolerance]]\nop = "a"\ndtype = "bf16"\narch = "ampere"\n', "not understood")],
)
def test_toml_errors_name_file_and_row(tmp_path, body, match):
    f = tmp_path / "bad.toml"
    f.write_text(body)
    with pytest.raises(ValueError, match=match):
        load_toml(f)
