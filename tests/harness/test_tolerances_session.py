"""Whose tolerance table: ``ToleranceTable`` objects, the active one, and a pytest session's own table.

A session's table is its ``Session.tolerances``: built from the base table and the ini's TOML files,
then whatever conftest.py and tests register; a nested (pytester) session gets its own and puts the outer
one back, unchanged, when it ends, also when it ends in a usage error.
"""

from __future__ import annotations

import dataclasses

import pytest

from harness import session, tolerances
from harness.plugin import session_key
from harness.tolerances import Tolerance, ToleranceTable

pytestmark = pytest.mark.lane_independent  # tables and sessions: no device involved


def snapshot() -> dict:
    """The active table as plain data, identity fields included (``Tolerance.__eq__`` ignores origin)."""
    return {k: dataclasses.astuple(v) for k, v in tolerances.rows().items()}


@pytest.fixture
def outer_rows(tmp_path):
    """This (outer) session's table with a TOML row and a Python row of its own; put back afterwards."""
    table = tolerances.active_table()  # the session's own (a test below checks it is the stash's)
    saved = table.rows()
    f = tmp_path / "outer.toml"
    f.write_text('[[tolerance]]\nop = "outer.op"\ndtype = "bf16"\narch = "*"\natol = 0.5\n')
    tolerances.load_toml(f)
    tolerances.register("outer.py", "bf16", "*", Tolerance(atol=0.25))
    yield f
    table._rows.clear()
    table._rows.update(saved)


# ------------------------------------------------------------------------------------------ plain Python


def test_tables_are_independent_and_module_functions_follow_the_active_one():
    a, b = ToleranceTable.with_defaults(), ToleranceTable.with_defaults()
    a.register("t.op", "bf16", "sm90", Tolerance(atol=1.0))
    assert a.lookup("t.op", "bf16", "sm90").key == "t.op/bf16/sm90"
    assert b.lookup("t.op", "bf16", "sm90").key == "*/bf16/*"
    assert a.lookup("x", "fp32", "sm80") == tolerances.lookup("x", "fp32", "sm80")  # same defaults
    before = snapshot()
    s = session.current()
    previous = s.tolerances
    s.tolerances = b
    try:
        assert tolerances.active_table() is b
        tolerances.register("m.op", "fp16", "cuda", Tolerance(rtol=0.5))
        assert b.lookup("m.op", "fp16", "sm90").rtol == 0.5
        assert tolerances.lookup("m.op", "fp16", "sm90").rtol == 0.5
        tolerances.reset()
        assert "m.op" not in {k[0] for k in b.rows()}
    finally:
        s.tolerances = previous
    assert snapshot() == before  # the session's table never saw any of it
    assert ("m.op", "fp16", "cuda") not in previous.rows()


def test_outside_a_session_the_base_table_is_active(monkeypatch):
    monkeypatch.setattr(session, "_stack", [])
    assert tolerances.active_table() is tolerances.base_table()


def test_session_table_copies_the_base_table_never_the_active_one(tmp_path, monkeypatch, outer_rows):
    base = ToleranceTable.with_defaults()
    base.register("script.op", "bf16", "*", Tolerance(atol=3.0))  # e.g. a script registering before pytest.main
    monkeypatch.setattr(tolerances, "_BASE", base)  # what base_table() returns
    (tmp_path / "rows").mkdir()
    (tmp_path / "rows" / "a.toml").write_text('[[tolerance]]\nop = "a.op"\ndtype = "bf16"\narch = "*"\natol = 1.0\n')
    t = tolerances.session_table(["rows/*.toml"], tmp_path)
    assert t is not base and t is not tolerances.active_table()
    assert t.lookup("script.op", "bf16", "sm90").atol == 3.0
    assert t.lookup("a.op", "bf16", "sm90").origin == "rows/a.toml:1"  # relative to the root it was given
    assert t.lookup("outer.op", "bf16", "sm90").key == "*/bf16/*"  # the active (session) table's row: not copied
    assert ("a.op", "bf16", "*") not in base.rows()  # the base table is only read
    with pytest.raises(FileNotFoundError, match="harness_tolerance_files: 'nope.toml' does not exist"):
        tolerances.session_table(["nope.toml"], tmp_path)


def test_a_bad_row_loads_nothing_of_its_file(tmp_path):
    f = tmp_path / "half.toml"
    f.write_text('[[tolerance]]\nop = "ok.op"\ndtype = "bf16"\narch = "*"\natol = 1.0\n\n'
                 '[[tolerance]]\nop = "bad.op"\ndtype = "bf16"\narch = "*"\natol = -1.0\n')
    t = ToleranceTable.with_defaults()
    before = t.rows()
    with pytest.raises(ValueError, match=r"half.toml:7, row 2: Tolerance.atol must be"):
        t.load_toml(f)
    assert t.rows() == before


# --------------------------------------------------------------------------------------- nested sessions

INNER_TOML = """
[[tolerance]]
op = "inner.op"
dtype = "bf16"
arch = "*"
atol = 1.0

[[tolerance]]
op = "shared.op"
dtype = "bf16"
arch = "*"
atol = 1.0
"""

INNER_CONFTEST = """
from pathlib import Path

from harness.tolerances import Tolerance, register

Path(__file__).with_name("conftest-imported").touch()

# at import time, before pytest_configure: must land in this session's table, over its TOML row
register("shared.op", "bf16", "*", Tolerance(atol=2.0))
register("conftest.op", "bf16", "*", Tolerance(atol=4.0))
"""

INNER_TESTS = """
from harness import session, tolerances
from harness.plugin import session_key
from harness.tolerances import Tolerance

def test_own_toml_and_conftest_rows():
    assert tolerances.lookup("inner.op", "bf16", "sm90").origin.endswith("inner.toml:2")
    shared = tolerances.lookup("shared.op", "bf16", "sm90")
    assert (shared.atol, shared.origin) == (2.0, "python")  # conftest.py ran after the TOML files
    assert tolerances.lookup("conftest.op", "bf16", "sm90").atol == 4.0

def test_no_rows_of_the_outer_session():
    for op in ("outer.op", "outer.py"):
        assert tolerances.lookup(op, "bf16", "sm90").key == "*/bf16/*"

def test_the_stashed_table_is_the_active_one(request, tolerance):
    assert request.config.stash[session_key].tolerances is tolerances.active_table()
    tolerances.register("test.op", "fp32", "*", Tolerance(rtol=0.5))
    assert tolerance(op="test.op", dtype="fp32").rtol == 0.5
"""

SUB_CONFTEST = """
from harness.tolerances import Tolerance, register

register("sub.op", "bf16", "*", Tolerance(atol=8.0))  # a conftest imported during collection
"""

SUB_TEST = """
from harness import tolerances

def test_sub_conftest_row():
    assert tolerances.lookup("sub.op", "bf16", "sm90").atol == 8.0
    assert tolerances.lookup("conftest.op", "bf16", "sm90").atol == 4.0
"""


def inner_project(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nharness_tolerance_files = rows/*.toml\n")
    (pytester.path / "rows").mkdir()
    (pytester.path / "rows" / "inner.toml").write_text(INNER_TOML)
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_inner=INNER_TESTS)
    sub = pytester.mkpydir("sub")
    (sub / "conftest.py").write_text(SUB_CONFTEST)
    (sub / "test_sub.py").write_text(SUB_TEST)


def test_a_nested_session_has_its_own_table_and_leaves_the_outer_one_unchanged(pytester, outer_rows, request):
    inner_project(pytester)
    outer = tolerances.active_table()
    assert request.config.stash[session_key].tolerances is outer
    before = snapshot()
    assert tolerances.lookup("outer.op", "bf16", "sm90").origin == f"{outer_rows}:1"

    pytester.runpytest("--harness-arch=interp").assert_outcomes(passed=4)

    assert tolerances.active_table() is outer
    assert snapshot() == before
    for op in ("inner.op", "conftest.op", "sub.op", "test.op"):
        assert tolerances.lookup(op, "bf16", "sm90").key == "*/bf16/*"
    assert tolerances.lookup("shared.op", "bf16", "sm90").atol == 1e-5


@pytest.mark.parametrize(
    "args, ini, expect",
    [(["--no-such-option"], "", "*unrecognized arguments: --no-such-option*"),  # after conftest.py ran
     ([], "harness_tolerance_files = rows/missing.toml", "*'rows/missing.toml' does not exist*")],  # before
)
def test_a_session_that_ends_in_a_usage_error_puts_the_outer_table_back(pytester, outer_rows, args, ini, expect):
    inner_project(pytester)
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    outer, before = tolerances.active_table(), snapshot()
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expect])
    assert (pytester.path / "conftest-imported").exists() == (not ini)
    assert tolerances.active_table() is outer
    assert snapshot() == before
    assert tolerances.lookup("conftest.op", "bf16", "sm90").key == "*/bf16/*"


def test_xdist_workers_build_the_same_table(pytester):
    inner_project(pytester)
    pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider").assert_outcomes(passed=4)


def test_a_plugin_registered_by_a_conftest_opens_its_table_at_configure(pytester, outer_rows):
    """Loaded through ``pytest_plugins`` (too late for pytest_load_initial_conftests): the table opens at
    configure, from the ini's TOML files, and is closed the same way."""
    pytester.makeini("[pytest]\nharness_tolerance_files = rows/*.toml\n")
    (pytester.path / "rows").mkdir()
    (pytester.path / "rows" / "inner.toml").write_text(INNER_TOML)
    pytester.makeconftest('pytest_plugins = ["harness.plugin"]\n')
    pytester.makepyfile("""
        from harness import tolerances
        from harness.plugin import session_key

        def test_table(request):
            assert request.config.stash[session_key].tolerances is tolerances.active_table()
            assert tolerances.lookup("inner.op", "bf16", "sm90").atol == 1.0
            assert tolerances.lookup("outer.op", "bf16", "sm90").key == "*/bf16/*"
    """)
    outer, before = tolerances.active_table(), snapshot()
    pytester.runpytest("-p", "no:harness", "--harness-arch=interp").assert_outcomes(passed=1)
    assert tolerances.active_table() is outer
    assert snapshot() == before
