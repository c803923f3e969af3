"""The (op, dtype, arch) table: fallback order, defaults, TOML rows, errors."""

import os
import threading

import numpy as np
import pytest
import torch

from harness import session, tolerances
from harness.tolerances import Tolerance, load_toml, lookup, register

pytestmark = pytest.mark.lane_independent  # the same on every lane: the GPU lane skips it


@pytest.fixture(autouse=True)
def table(monkeypatch):
    """A copy of the session's table for each test, so rows registered here go nowhere else."""
    t = tolerances.active_table().copy()
    monkeypatch.setattr(session.current(), "tolerances", t)
    return t


def test_defaults_mirror_torch_testing():
    import torch
    from torch.testing._comparison import default_tolerances  # assert_close's own table

    assert (lookup("anything", "bf16", "sm90").rtol, lookup("anything", "bf16", "sm90").atol) == (1.6e-2, 1e-5)
    assert lookup("x", "fp16", "interp").rtol == 1e-3
    assert lookup("x", "fp32", "sm80").rtol == 1.3e-6
    for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16), ("fp32", torch.float32),
                        ("fp64", torch.float64)):
        t = lookup("x", name, "sm90")
        assert (t.rtol, t.atol) == default_tolerances(dtype), name


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
    session.current().tolerances = tolerances.ToleranceTable()  # empty; the fixture puts the table back
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
     ('[[tolerance]]\nop = "a"\ndtype = "bf16"\narch = "ampere"\n', "not understood"),
     # rows that would load and never apply, or silently replace another
     ('[[tolerance]]\nop = "a"\ndtype = "fp33"\narch = "*"\n', r"row 1: dtype 'fp33' is no dtype.*'fp32'"),
     ('[[tolerance]]\nop = "a"\ndtype = "bf16-e4nx"\narch = "*"\n', r"row 1: dtype 'bf16-e4nx' is no dtype"),
     ('[[tolerance]]\nop = "a"\ndtype = "bf16"\narch = "sm91"\n', r"row 1: arch 'sm91' .*did you mean 'sm90'"),
     ('[[tolerance]]\nop = "a"\ndtype = "bf16"\narch = "bogus"\n', r"bad.toml:1, row 1: arch 'bogus' is not"),
     ('[[tolerance]]\nop = "a"\ndtype = "bf16"\narch = "*"\n[[tolerance]]\nop = "a"\ndtype = "bf16"\narch = "*"\n',
      r"bad.toml:5, row 2: row a/bf16/\* is already defined at .*bad.toml:1"),
     # wrong types: an error naming the file and the field, never a TypeError traceback
     ('[[tolerance]]\nop = "a"\ndtype = 5\narch = "*"\n', r"bad.toml:1, row 1: dtype must be a non-empty string"),
     ('[[tolerance]]\nop = 5\ndtype = "bf16"\narch = "*"\n', r"bad.toml:1, row 1: op must be a non-empty string"),
     ('[[tolerance]]\nop = "a"\ndtype = "bf16"\narch = 90\n', r"bad.toml:1, row 1: arch must be a non-empty"),
     ('tolerance = [1, 2]\n', r"bad.toml: 'tolerance' must be an array of tables"),
     ('[[tolerance]]\nop = "a"\ndtype = "bf16"\narch = "*"\nnote = 3\n', r"row 1: note must be a string")],
)
def test_toml_errors_name_file_and_row(tmp_path, body, match):
    f = tmp_path / "bad.toml"
    f.write_text(body)
    with pytest.raises(ValueError, match=match) as e:
        load_toml(f)
    assert "bad.toml" in str(e.value)


def test_a_file_that_is_not_utf8_text_is_named(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_bytes(b'[[tolerance]]\nop = "\xff\xfe"\n')
    with pytest.raises(ValueError, match=r"tolerance file .*bad.toml: not UTF-8 text"):
        load_toml(f)


def test_a_row_defined_in_two_files_is_refused_naming_both(tmp_path):
    row = '[[tolerance]]\nop = "a"\ndtype = "bf16"\narch = "sm90"\nrtol = {}\n'
    (tmp_path / "a.toml").write_text(row.format(0.1))
    (tmp_path / "b.toml").write_text(row.format(0.5))
    with pytest.raises(ValueError, match=r"tolerance file b.toml:1, row 1: row a/bf16/sm90 is already defined at "
                                         r"a.toml:1"):
        tolerances.ToleranceTable().load_globs(["*.toml"], tmp_path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_matched_by_the_globs_is_refused_not_read(tmp_path):
    """Reading a FIFO blocks until a writer comes: the session start hung. It is refused by its file type."""
    fifo = tmp_path / "rows.toml"
    os.mkfifo(fifo)
    outcome = []

    def load():
        try:
            tolerances.ToleranceTable().load_globs(["*.toml"], tmp_path)
        except ValueError as e:
            outcome.append(str(e))

    t = threading.Thread(target=load, daemon=True)
    t.start()
    t.join(10)
    if t.is_alive():  # unblock the reader, then fail
        os.close(os.open(fifo, os.O_WRONLY))
        t.join(10)
        pytest.fail("load_globs blocked on a FIFO")
    assert outcome == ["tolerance file rows.toml: not a regular file; expected a TOML file of [[tolerance]] rows"]


def test_the_dtype_names_rows_are_checked_against_are_the_harness_own():
    """tolerances spells the names without importing torch; they must be the dtype, FP8 and MX tables' own."""
    from harness import fp8
    from harness.dtypes import FLOAT_DTYPES
    from harness.mx import SCALE_RULES, SCHEMES

    assert tolerances.FLOAT_NAMES == tuple(FLOAT_DTYPES)
    assert tolerances.FP8_NAMES == tuple(fp8.FORMATS)
    assert tolerances.MX_NAMES == tuple(SCHEMES)
    assert tolerances.MX_RULES == tuple(SCALE_RULES)
    for d in ("*", "bf16", "e4nv", "nvfp4", "bf16-e4b15", "fp32-nvfp4", "bf16-mxfp4-rceil"):
        assert tolerances.known_dtype(d), d
    for d in ("fp33", "bf16-", "bf16-fp16", "e4nv-bf16", "bf16-mxfp4-round", "bf16-nvfp4-rceil-x", ""):
        assert not tolerances.known_dtype(d), d


# ------------------------------------------------------------------------------- issue 9: precedence, kinds


def test_op_row_beats_wildcard_op_row_at_a_tighter_arch_and_dtype():
    """Step 1 of the chain: the op loop is outermost. A wildcard-op row at the exact arch and dtype is a
    default for ops without rows, never a cap on an op that has one (even at '*' arch and '*' dtype)."""
    register("*", "bf16", "sm90", Tolerance(atol=0.5))
    register("op4", "*", "*", Tolerance(atol=9.0))
    assert lookup("op4", "bf16", "sm90").key == "op4/*/*"
    assert lookup("other", "bf16", "sm90").key == "*/bf16/sm90"
    assert lookup("other", "bf16", "sm80").key == "*/bf16/*"


def test_arch_chain_each_step():
    """Step 2: name -> family -> kind -> '*', each found only when the more specific ones are absent."""
    op = "chain.op"
    register(op, "bf16", "*", Tolerance(atol=4.0))
    assert lookup(op, "bf16", "sm86").key == f"{op}/bf16/*"
    register(op, "bf16", "cuda", Tolerance(atol=3.0))
    assert lookup(op, "bf16", "sm86").key == f"{op}/bf16/cuda"
    assert lookup(op, "bf16", "interp").key == f"{op}/bf16/*"  # another kind skips the cuda row
    register(op, "bf16", "sm80", Tolerance(atol=2.0))
    assert lookup(op, "bf16", "sm86").key == f"{op}/bf16/sm80"
    assert lookup(op, "bf16", "sm89").key == f"{op}/bf16/cuda"  # sm89 is its own family, not sm80's
    register(op, "bf16", "sm86", Tolerance(atol=1.0))
    assert lookup(op, "bf16", "sm86").key == f"{op}/bf16/sm86"
    assert lookup(op, "bf16", "sm87").key == f"{op}/bf16/sm80"


def test_arch_beats_dtype_within_an_op():
    """Between steps 2 and 3: an exact-arch row with '*' dtype wins over a kind row with the exact dtype."""
    register("ad.op", "bf16", "cuda", Tolerance(atol=1.0))
    register("ad.op", "*", "sm90", Tolerance(atol=2.0))
    assert lookup("ad.op", "bf16", "sm90").key == "ad.op/*/sm90"
    assert lookup("ad.op", "bf16", "sm80").key == "ad.op/bf16/cuda"


def test_dtype_chain_each_step():
    """Step 3: case id -> its source dtype -> '*'; a short name goes straight to '*'; the format part of a
    case id is not a fallback."""
    op = "dt.op"
    register(op, "*", "sm90", Tolerance(atol=3.0))
    register(op, "e4nv", "sm90", Tolerance(max_ulp=1))
    assert lookup(op, "bf16-e4nv", "sm90").key == f"{op}/*/sm90"
    register(op, "bf16", "sm90", Tolerance(atol=2.0))
    assert lookup(op, "bf16-e4nv", "sm90").key == f"{op}/bf16/sm90"
    assert lookup(op, "fp16-e4nv", "sm90").key == f"{op}/*/sm90"
    register(op, "bf16-e4nv", "sm90", Tolerance(atol=1.0))
    assert lookup(op, "bf16-e4nv", "sm90").key == f"{op}/bf16-e4nv/sm90"
    assert lookup(op, "e4nv", "sm90").key == f"{op}/e4nv/sm90"


def test_every_key_tried_is_listed_in_order():
    session.current().tolerances = tolerances.ToleranceTable()  # empty; the fixture puts the table back
    with pytest.raises(KeyError) as e:
        lookup("k", "bf16-e4nv", "sm86")
    tried = e.value.args[0].split("tried: ")[1].split(", ")
    assert tried[:4] == ["k/bf16-e4nv/sm86", "k/bf16/sm86", "k/*/sm86", "k/bf16-e4nv/sm80"]
    assert tried[9:12] == ["k/bf16-e4nv/*", "k/bf16/*", "k/*/*"]
    assert tried[12] == "*/bf16-e4nv/sm86" and tried[-1] == "*/*/*" and len(tried) == 24


def test_kind_filter_skips_rows_of_the_other_kind():
    # an FP8-only op asked for fp32 floats: the code row must not come back as "rtol = atol = 0"
    assert lookup("fp8_cast", "fp32", "sm90").kind == "codes"  # unfiltered: the row there is
    t = lookup("fp8_cast", "fp32", "sm90", kind="float")
    assert t.key == "*/fp32/*" and t.kind == "float"
    # an unknown op with an FP8 case: the bf16 float default is not a 0-ULP rule for codes
    with pytest.raises(KeyError, match=r"no codes rule tolerance row .*skipped rows of the other kind: "
                                       r"\*/bf16/\* \(float rule\)"):
        lookup("unknown.op", "bf16-e4nv", "sm90", kind="codes")
    assert lookup("fp8_cast", "bf16-e4nv", "sm90", kind="codes").key == "fp8_cast/*/cuda"
    with pytest.raises(ValueError, match="kind must be None, 'float' or 'codes'"):
        lookup("x", "bf16", "sm90", kind="fp8")


@pytest.mark.parametrize(
    "kwargs, match",
    [({"max_ulp": 0, "rtol": 1e-3}, "got both"), ({"max_ulp": 1, "atol": 1e-3}, "got both"),
     ({"ulp_floor": 1e-3}, "ulp_floor=0.001 needs max_ulp")],
)
def test_a_row_is_float_or_codes_never_both(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Tolerance(**kwargs)
    assert Tolerance(max_ulp=1, ulp_floor=1e-3).kind == "codes"
    assert Tolerance(rtol=1e-3, max_mismatch=0.1).kind == "float"


def test_override_cannot_mix_kinds():
    with pytest.raises(ValueError, match="got both"):
        lookup("fp8_cast", "bf16-e4nv", "sm90").with_(rtol=0.1)


def test_lookup_validates_its_arguments():
    with pytest.raises(ValueError, match="op must be a non-empty string"):
        lookup("", "bf16", "sm90")
    with pytest.raises(ValueError, match="not understood"):
        lookup("x", "bf16", "ampere")
    with pytest.raises(TypeError, match="dtype must be a short name"):
        lookup("x", 3, "sm90")


def test_a_row_carries_its_identity_and_origin_as_data(tmp_path):
    """op, dtype, arch and where the row was written are fields (no parsing of the key string), and a TOML
    row's origin is the line of its own [[tolerance]] header."""
    f = tmp_path / "rows.toml"
    f.write_text('# measured rows\n\n[[tolerance]]\nop = "a.op"\ndtype = "bf16"\narch = "sm90"\natol = 1.0\n\n'
                 '[[tolerance]]\nop = "golden/a.op"\ndtype = "e4nv"\narch = "sm_80"\nmax_ulp = 2\n')
    assert load_toml(f) == 2
    a, g = lookup("a.op", "bf16", "sm90"), lookup("golden/a.op", "e4nv", "sm86")
    assert (a.op, a.dtype, a.arch, a.origin) == ("a.op", "bf16", "sm90", f"{f}:3")
    assert (g.op, g.dtype, g.arch, g.origin) == ("golden/a.op", "e4nv", "sm80", f"{f}:9")
    d = lookup("nothing.here", "fp32", "sm90")
    assert (d.op, d.dtype, d.arch, d.origin) == ("*", "fp32", "*", "default")
    register("p.op", "*", "cuda", Tolerance(rtol=0.5))
    assert lookup("p.op", "fp16", "sm90").origin == "python"
    over = a.with_(atol=2.0)  # an override keeps the row it overrides
    assert (over.op, over.origin, over.key) == ("a.op", f"{f}:3", "a.op/bf16/sm90+override")
    assert Tolerance(atol=1.0) == replace_identity(a)  # identity never changes what a rule compares equal to


def replace_identity(t: Tolerance) -> Tolerance:
    from dataclasses import replace

    return replace(t, key="", note="", op="x", dtype="y", arch="z", origin="w")


def test_a_failure_cites_where_its_row_is_defined(tmp_path):
    import torch

    from harness import assert_close_tol

    f = tmp_path / "rows.toml"
    f.write_text('[[tolerance]]\nop = "c.op"\ndtype = "fp32"\narch = "*"\natol = 0.25\n')
    load_toml(f)
    with pytest.raises(AssertionError, match=rf"Tolerance row defined at: {f}:1"):
        assert_close_tol(torch.tensor([1.0]), torch.tensor([2.0]), lookup("c.op", "fp32", "sm90"))


def test_allowed_error_and_the_mismatch_fraction_bounds():
    assert Tolerance(rtol=0.5, atol=0.25).allowed(2.0) == 1.25
    assert Tolerance(rtol=0.5, atol=0.25).allowed(np.float32(2.0)) == 1.25
    assert torch.equal(Tolerance(rtol=0.5, atol=0.25).allowed(torch.tensor([2.0])), torch.tensor([1.25]))
    for bad in ("2", None, [2.0], True):
        with pytest.raises(TypeError, match=r"expected_abs: expected a number or a tensor"):
            Tolerance(rtol=0.5).allowed(bad)
    assert Tolerance(max_mismatch=1.0).max_mismatch == 1.0  # every element may break the rule: allowed
    with pytest.raises(ValueError, match=r"max_mismatch is a fraction in \[0, 1\], got 1.01"):
        Tolerance(max_mismatch=1.01)


def test_register_refuses_an_empty_or_non_string_op():
    table = tolerances.ToleranceTable()
    for op in ("", None, 3):
        with pytest.raises(ValueError, match=r"op must be a non-empty string, got"):
            table.register(op, "bf16", "*", Tolerance(rtol=0.1))


def test_inline_toml_rows_have_no_header_line(tmp_path):
    """Rows written as an inline array (no [[tolerance]] headers to cite) are cited by their row number."""
    f = tmp_path / "inline.toml"
    f.write_text('tolerance = [{op = "a", dtype = "bf16", arch = "*", rtol = 0.5}, '
                 '{op = "b", dtype = "bf16", arch = "*", atol = -1.0}]\n')
    with pytest.raises(ValueError, match=r"inline\.toml, row 2: Tolerance\.atol must be"):
        tolerances.ToleranceTable().load_toml(f)
    f.write_text('tolerance = [{op = "a", dtype = "bf16", arch = "*", rtol = 0.5}]\n')
    table = tolerances.ToleranceTable()
    assert table.load_toml(f) == 1 and table.lookup("a", "bf16", "sm90").origin.endswith("inline.toml, row 1")


def test_load_globs_refuses_a_missing_literal_path_only(tmp_path):
    (tmp_path / "rows.toml").write_text('[[tolerance]]\nop = "a"\ndtype = "bf16"\narch = "*"\nrtol = 0.5\n')
    table = tolerances.ToleranceTable()
    assert table.load_globs(["rows.toml", "nothing/*.toml"], tmp_path) == [tmp_path / "rows.toml"]
    with pytest.raises(FileNotFoundError, match=r"harness_tolerance_files: 'typo\.toml' does not exist under"):
        table.load_globs(["typo.toml"], tmp_path)


@pytest.mark.parametrize("field", ["key", "note", "op", "dtype", "arch", "origin"])
def test_a_rows_text_fields_are_strings(field):
    """A key or note of another type would print as something it is not in a failure's tolerance line."""
    with pytest.raises(TypeError, match=rf"Tolerance.{field} must be a str, got int"):
        Tolerance(**{field: 5})


@pytest.mark.parametrize(("body", "match"), [
    ('[[tolerances]]\nop = "x"\ndtype = "bf16"\narch = "sm90"\n',
     r"tol\.toml: unknown top-level key\(s\) 'tolerances'.*did you mean \[\[tolerance\]\]"),
    ('title = "rows"\n[[tolerance]]\nop = "x"\ndtype = "bf16"\narch = "sm90"\n',
     r"tol\.toml: unknown top-level key\(s\) 'title'"),
])
def test_unknown_top_level_keys_are_refused_naming_file_and_key(tmp_path, body, match):
    """A misspelt [[tolerances]] (or another key beside the rows) loaded 0 rows, or ignored it, without a word."""
    f = tmp_path / "tol.toml"
    f.write_text(body)
    with pytest.raises(ValueError, match=match):
        tolerances.ToleranceTable().load_toml(f, root=tmp_path)


def test_a_toml_file_of_other_tables_only_loads_no_row_and_is_no_error(tmp_path):
    """A glob such as ``*.toml`` also matches pyproject.toml: a file holding no row and nothing like one is none."""
    f = tmp_path / "pyproject.toml"
    f.write_text('[project]\nname = "x"\n[tool.pytest.ini_options]\naddopts = "-q"\n')
    table = tolerances.ToleranceTable()
    table.load_toml(f, root=tmp_path)
    assert len(table) == 0


def test_a_header_inside_a_multiline_string_does_not_shift_the_cited_line(tmp_path):
    """A note holding a "[[tolerance]]" line was counted as a row's header: the error cited line 6, not 8."""
    f = tmp_path / "tol.toml"
    f.write_text('[[tolerance]]\nop = "m"\ndtype = "bf16"\narch = "sm90"\nnote = """\n[[tolerance]]\n"""\n'
                 '[[tolerance]]\nop = "m"\ndtype = "bf16"\narch = "sm80"\nrtol = -1\n')
    with pytest.raises(ValueError, match=r"tol\.toml:8, row 2: Tolerance\.rtol"):
        tolerances.ToleranceTable().load_toml(f, root=tmp_path)
