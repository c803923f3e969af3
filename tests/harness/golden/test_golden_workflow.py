"""The golden workflow as users meet it: throwaway pytester projects, run through pytest itself.

Inputs vary through environment variables (``GOLDEN_SHIFT``: how many float ULPs / FP8 codes the test
moves one element), so the test sources never change between runs.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

# Imported here, before any in-process pytester run: pytester drops the modules first imported during a run,
# and torch cannot be imported a second time in one process (SystemError, then a segfault). Without this an
# xdist worker whose first test is one of these crashes.
import torch

pytest_plugins = ["pytester"]
pytestmark = [pytest.mark.lane_independent, pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")]


@pytest.fixture(autouse=True)
def _outside_ci(monkeypatch):
    """These tests drive the regen workflow itself, which refuses to run with CI set; tests of that
    refusal set CI again explicitly."""
    monkeypatch.delenv("CI", raising=False)

# The projects run on the interpreter lane whatever lane runs this file: their expectations (the generating
# arch is "interp", "--harness-arch=sm90" is another arch) must hold on a GPU box too.
INI = """
[pytest]
testpaths = tests
addopts = -p no:cacheprovider -p no:hypothesispytest -p harness.golden.plugin --harness-lane=interp
{extra}
"""

KERNELS = '''
import os

import pytest
import torch


def shift() -> int:
    return int(os.environ.get("GOLDEN_SHIFT", "0"))


def floats() -> torch.Tensor:
    x = torch.linspace(-3, 3, 8, dtype=torch.float32)
    for _ in range(shift()):
        x[3] = torch.nextafter(x[3], torch.tensor(100.0))
    return x


def test_float(golden):
    golden.check("out", floats())


def test_fp8(golden):
    codes = torch.arange(0, 128, 16, dtype=torch.int32).to(torch.uint8)  # 0x00..0x70: finite e4nv codes
    codes[5] += shift()
    codes[7] = 0x7F  # a NaN code: recorded by the golden, it must face a NaN code again (asked for)
    golden.check("codes", codes.view(torch.float8_e4m3fn), equal_nan=True)
'''

OUT = "golden/test_k/test_float/_/out.npz"
CODES = "golden/test_k/test_fp8/_/codes.npz"


def project(pytester: pytest.Pytester, source: str = KERNELS, *, name: str = "test_k.py",
            extra: str = "") -> None:
    pytester.makeini(INI.format(extra=extra))
    tests = pytester.path / "tests"
    tests.mkdir(exist_ok=True)
    (tests / name).write_text(source)


def run(pytester: pytest.Pytester, *args: str, shift: int = 0) -> pytest.RunResult:
    os.environ["GOLDEN_SHIFT"] = str(shift)
    try:
        return pytester.runpytest(*args)
    finally:
        del os.environ["GOLDEN_SHIFT"]


def esc(line: str) -> str:
    """An fnmatch pattern matching ``[``/``]`` literally (tolerance keys and node ids contain them)."""
    return re.sub(r"([\[\]])", r"[\1]", line)


def text(result: pytest.RunResult) -> str:
    return "\n".join(result.outlines + result.errlines)


# ------------------------------------------------------------------------------------------ lifecycle

def test_lifecycle_missing_regen_pass_mismatch_regen(pytester):
    project(pytester)
    out = pytester.path / OUT

    r = run(pytester)
    r.assert_outcomes(failed=2)
    r.stdout.fnmatch_lines([
        f"golden 'out' not found: {OUT}",
        "Create it with:",
        "    python -m harness golden regen tests/test_k.py::test_float",
    ])
    assert not (pytester.path / "golden").exists(), "a missing golden must never be created silently"

    r = run(pytester, "--golden-regen")
    r.assert_outcomes(failed=2)
    r.stdout.fnmatch_lines([f"golden 'out' regenerated: {OUT} (new, 8 elements; was missing)",
                            "(--golden-regen: the test fails so that the new golden is reviewed*"])
    first = out.read_bytes()

    run(pytester).assert_outcomes(passed=2)

    r = run(pytester, shift=1)
    r.assert_outcomes(failed=2)
    r.stdout.fnmatch_lines([
        f"*golden 'out' does not match {OUT}",
        "*  golden: generated on interp (triton-interpreter), torch *; running on interp",
        esc("*  tolerance: Tolerance(rtol=0.0e+00, atol=0.0e+00) [golden/exact/interp] "
            "(same arch: bit-exact)"),
        "*To update it: python -m harness golden regen tests/test_k.py::test_float  "
        "(or pytest --golden-regen)",
    ])
    assert out.read_bytes() == first, "a mismatch must leave the golden untouched"

    r = run(pytester, "--golden-regen", shift=1)
    r.assert_outcomes(failed=2)
    r.stdout.fnmatch_lines([f"golden 'out' regenerated: {OUT} (1 / 8 elements changed, worst abs change *)",
                            "previous comparison:", f"*golden 'out' does not match {OUT}"])
    r.stdout.fnmatch_lines([f"golden 'codes' regenerated: {CODES} (1 / 8 elements changed, worst 1 ulp, *"])
    assert out.read_bytes() != first

    run(pytester, shift=1).assert_outcomes(passed=2)

    # regen-all passes, and re-capturing the first inputs gives the first bytes back: deterministic files
    r = run(pytester, "--golden-regen-all")
    r.assert_outcomes(passed=2)
    r.stdout.fnmatch_lines(["golden (regen-all): 2 checks, 0 created, 2 rewritten"])
    assert out.read_bytes() == first
    mtime = out.stat().st_mtime_ns
    r = run(pytester, "--golden-regen-all")
    r.assert_outcomes(passed=2)
    r.stdout.fnmatch_lines(["golden (regen-all): 2 checks, 0 created, 0 rewritten"])
    assert out.stat().st_mtime_ns == mtime, "an unchanged golden is not rewritten"
    assert out.read_bytes() == first


def test_mismatch_messages_show_the_report(pytester):
    project(pytester)
    run(pytester, "--golden-regen-all").assert_outcomes(passed=2)
    r = run(pytester, shift=2)
    r.assert_outcomes(failed=2)
    r.stdout.fnmatch_lines([f"*golden 'codes' does not match {CODES}",
                            esc("*  tolerance: Tolerance(max_ulp=0) [golden/exact/interp] "
                                "(same arch: bit-exact)")])
    r.stdout.fnmatch_lines(["*1 / 8*"])  # the compare report's mismatch count, for both checks
    assert text(r).count("1 / 8") >= 2


def test_same_arch_means_bit_exact_not_just_equal(pytester):
    project(pytester, '''
import os

import torch


def test_zeros(golden):
    x = torch.zeros(4)
    if os.environ.get("GOLDEN_SHIFT", "0") != "0":
        x[1] = -0.0  # equal in value, different bits
    golden.check("z", x)
''')
    run(pytester, "--golden-regen-all").assert_outcomes(passed=1)
    r = run(pytester, shift=1)
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*1 / 4 elements are equal in value but differ in bits (signed zero or NaN "
                            "payload); bit-exact is required on the generating arch"])
    # another arch compares values through the table, where -0 == +0
    run(pytester, "--harness-arch=sm90", shift=1).assert_outcomes(passed=1)


def test_fp8_nan_codes_pass_only_with_equal_nan(pytester):
    """A NaN code passes a golden check only when the test asks (equal_nan=True), and then against any NaN code
    of the format (e4nv 0x7f and 0xff are both NaN), never a number; without it a golden holding NaN is never
    written, and the same file checked without equal_nan fails."""
    project(pytester, '''
import os

import pytest
import torch

from harness.tolerances import Tolerance


@pytest.mark.parametrize("equal_nan", [True, False])
def test_nan(golden, equal_nan):
    codes = torch.tensor([0x38, 0x7F], dtype=torch.uint8)
    codes[1] = {"0": 0x7F, "1": 0xFF, "2": 0x7E}[os.environ.get("GOLDEN_SHIFT", "0")]
    golden.check("c", codes, fmt="e4nv", equal_nan=equal_nan, tol=Tolerance(max_ulp=0))
''')
    r = run(pytester, "--golden-regen-all")
    r.assert_outcomes(passed=1, failed=1)
    r.stdout.fnmatch_lines(["*golden 'c': refusing to store 1 NaN code(s)*equal_nan=True*"])
    yes = pytester.path / "golden/test_k/test_nan/True/c.npz"
    no = yes.parent.parent / "False" / "c.npz"
    assert yes.is_file() and not no.exists()
    no.parent.mkdir()
    no.write_bytes(yes.read_bytes())  # the same codes, checked without equal_nan
    run(pytester, "-k", "True").assert_outcomes(passed=1)
    run(pytester, "-k", "True", shift=1).assert_outcomes(passed=1)  # 0xff against the recorded 0x7f
    run(pytester, "-k", "True", shift=2).assert_outcomes(failed=1)  # a number against NaN
    r = run(pytester, "-k", "False")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*NaN/inf codes never pass*"])


def test_regen_never_replaces_a_golden_of_another_arch(pytester):
    """Goldens captured on a GPU must survive a regen run on a CPU box: compared there, not rewritten."""
    project(pytester)
    out, sel = pytester.path / OUT, "tests/test_k.py::test_float"
    run(pytester, sel, "--golden-regen-all", "--harness-arch=sm90").assert_outcomes(passed=1)
    before = out.read_bytes()
    for flag in ("--golden-regen-all", "--golden-regen"):
        run(pytester, sel, flag).assert_outcomes(passed=1)  # within the cross-arch row: nothing to do
        r = run(pytester, sel, flag, shift=1000)  # 1000 float ULPs: beyond the fp32 cross-arch row
        r.assert_outcomes(failed=1)
        r.stdout.fnmatch_lines([f"*Not rewritten: {OUT} was captured on sm90 and this run is interp; a run here "
                                f"never rewrites it.",
                                "*To update it, run on sm90:",
                                f"*    python -m harness golden regen {sel}",
                                "*or, to replace it with this arch's output on purpose:",
                                f"*    rm {OUT} && python -m harness golden regen {sel}"])
        assert out.read_bytes() == before
    # a plain check run gives the same advice (not the regen command alone, which would refuse)
    r = run(pytester, sel, shift=1000)
    r.assert_outcomes(failed=1)
    assert "To update it: python" not in text(r)
    r.stdout.fnmatch_lines(["*To update it, run on sm90:", f"*    rm {OUT} && python -m harness golden regen {sel}"])
    # ... and that command works as printed
    r = shell(pytester, advised(r), shift=1000)
    assert r.ret == 0, text(r)
    assert out.read_bytes() != before
    run(pytester, sel, shift=1000).assert_outcomes(passed=1)
    _, meta = read(out)
    assert meta["arch"] == "interp"


def advised(result: pytest.RunResult) -> str:
    """The recapture command a failure printed (the line after 'on purpose:')."""
    lines = [line.strip() for line in result.outlines]
    at = next(i for i, line in enumerate(lines) if line.endswith("this arch's output on purpose:"))
    return lines[at + 1].removeprefix("E").strip()


def shell(pytester: pytest.Pytester, command: str, *, shift: int = 0) -> pytest.RunResult:
    """Run a printed command line as a user would, in the project root, with this venv's python first on
    PATH (so ``python`` is the interpreter running this suite)."""
    env_path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    os.environ["GOLDEN_SHIFT"] = str(shift)
    try:
        return pytester.run("env", f"PATH={env_path}", "sh", "-c", command)
    finally:
        del os.environ["GOLDEN_SHIFT"]


def read(path):
    from harness.golden.files import read_golden

    return read_golden(path)


def test_metadata_of_a_generated_golden(pytester):
    project(pytester, KERNELS.replace("def test_float(golden):",
                                      '@pytest.mark.harness_op("k.op")\n'
                                      '@pytest.mark.parametrize("n", [3])\n'
                                      'def test_float(golden, seed, n):'))
    run(pytester, "--golden-regen-all").assert_outcomes(passed=2)
    with np.load(pytester.path / "golden/test_k/test_float/3/out.npz", allow_pickle=False) as z:
        meta = json.loads(z["meta"].tobytes())
    import harness

    assert meta["op"] == "k.op" and meta["arch"] == "interp" and meta["device"] == "triton-interpreter"
    assert meta["test"] == {"module": "test_k", "test": "test_float", "param": "3",
                            "nodeid": "tests/test_k.py::test_float[3]"}
    assert isinstance(meta["seed"], int) and meta["dtype_case"] is None
    assert meta["torch_version"] == torch.__version__ and meta["harness_version"] == harness.__version__
    assert meta["shape"] == [8] and meta["dtype"] == "float32" and meta["fmt"] is None


# ------------------------------------------------------------------------------------- file problems

def test_corrupt_and_wrong_version_files(pytester):
    project(pytester)
    run(pytester, "--golden-regen-all").assert_outcomes(passed=2)
    out = pytester.path / OUT
    good = out.read_bytes()

    out.write_bytes(good[: len(good) // 2])
    r = run(pytester)
    r.assert_outcomes(failed=1, passed=1)
    r.stdout.fnmatch_lines(["*golden file */out.npz is truncated or corrupt (BadZipFile*",
                            "To rewrite it: python -m harness golden regen tests/test_k.py::test_float"])
    r = run(pytester, "--golden-regen")
    r.assert_outcomes(failed=1, passed=1)
    r.stdout.fnmatch_lines([f"golden 'out' regenerated: {OUT} (new, 8 elements; was unreadable (*"])
    assert out.read_bytes() == good

    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(good)) as zin, zipfile.ZipFile(buf, "w") as zout:
        meta = json.loads(np.lib.format.read_array(io.BytesIO(zin.read("meta.npy"))).tobytes())
        meta["format_version"] = 99
        mb = io.BytesIO()
        np.lib.format.write_array(mb, np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
        zout.writestr("meta.npy", mb.getvalue())
        zout.writestr("tensor.npy", zin.read("tensor.npy"))
    out.write_bytes(buf.getvalue())
    r = run(pytester)
    r.assert_outcomes(failed=1, passed=1)
    r.stdout.fnmatch_lines(["*golden file */out.npz has format version 99; this harness reads version 1 "
                            "(regenerate it)"])


def test_malformed_metadata_is_repaired_by_the_printed_command(pytester):
    """shape=5, dtype=5 or deep JSON used to crash the check (TypeError, RecursionError) and the regen run
    with it; now the check names the file and a command, and that command rewrites the file."""
    project(pytester)
    run(pytester, "--golden-regen-all").assert_outcomes(passed=2)
    out = pytester.path / OUT
    good = out.read_bytes()
    for field, value in (("shape", 5), ("dtype", 5), ("storage", 5), ("fmt", "e4nv"), ("name", None)):
        out.write_bytes(_edit_meta(good, **{field: value}))
        r = run(pytester)
        r.assert_outcomes(failed=1, passed=1)
        r.stdout.fnmatch_lines([f"*golden file */{OUT}: *", "To rewrite it: python -m harness golden regen "
                                "tests/test_k.py::test_float"])
        assert not re.search(r"TypeError|KeyError|AttributeError|RecursionError", text(r)), field
        if field == "shape":  # the printed command, as printed (a subprocess: slow, so once)
            r = shell(pytester, next(line for line in r.outlines if line.startswith("To rewrite it: "))
                      .removeprefix("To rewrite it: "))
            assert r.ret == 0, text(r)
            r.stdout.fnmatch_lines([f"  rewritten  {OUT}  8 elements (unreadable (golden file *"])
        else:  # what that command runs
            run(pytester, "tests/test_k.py::test_float", "--golden-regen-all").assert_outcomes(passed=1)
        assert out.read_bytes() == good, field
    out.write_bytes(_edit_meta(good, raw=b"[" * 100_000 + b"]" * 100_000))
    r = run(pytester)
    r.assert_outcomes(failed=1, passed=1)
    r.stdout.fnmatch_lines([f"*golden file */{OUT}: unreadable metadata (nested too deeply)*"])
    assert "RecursionError" not in text(r)
    run(pytester, "--golden-regen").assert_outcomes(failed=1, passed=1)
    assert out.read_bytes() == good


def _edit_meta(data: bytes, raw: bytes | None = None, **fields) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(buf, "w") as zout:
        meta = json.loads(np.lib.format.read_array(io.BytesIO(zin.read("meta.npy"))).tobytes())
        meta.update(fields)
        mb = io.BytesIO()
        np.lib.format.write_array(mb, np.frombuffer(raw if raw is not None else json.dumps(meta).encode(),
                                                    dtype=np.uint8))
        zout.writestr("meta.npy", mb.getvalue())
        zout.writestr("tensor.npy", zin.read("tensor.npy"))
    return buf.getvalue()


LAYOUT = '''
import os

import torch


def test_layout(golden):
    x = torch.linspace(-3, 3, 8, dtype=torch.float32)
    change = os.environ.get("GOLDEN_LAYOUT", "")
    if change == "column":
        x = x.reshape(8, 1)  # would broadcast against the golden's (8,) to (8, 8)
    elif change == "one":
        x = x[:1]  # would broadcast against (8,) and compare one value eight times
    elif change == "fp64":
        x = x.double()
    elif change == "fp8":
        x = x.to(torch.float8_e4m3fn)
    elif change == "codes":
        x = x.to(torch.float8_e4m3fn).view(torch.uint8)
    golden.check("out", x)
'''


@pytest.mark.parametrize("change, line", [
    ("column", "shape: got (8, 1), golden holds (8,)"),
    ("one", "shape: got (1,), golden holds (8,)"),
    ("fp64", "dtype: got float64, golden holds float32"),
    ("fp8", "dtype: got e4nv codes, golden holds float32"),
])
def test_changed_dtype_or_shape_is_named_never_broadcast(pytester, monkeypatch, change, line):
    project(pytester, LAYOUT)
    out = pytester.path / "golden/test_k/test_layout/_/out.npz"
    run(pytester, "--golden-regen-all").assert_outcomes(passed=1)
    monkeypatch.setenv("GOLDEN_LAYOUT", change)
    before = out.read_bytes()
    for args in ((), ("--harness-arch=sm90",)):  # same arch (exact) and another arch (tolerance table)
        r = run(pytester, *args)
        r.assert_outcomes(failed=1)
        r.stdout.fnmatch_lines(["*golden 'out' does not match golden/test_k/test_layout/_/out.npz", f"*  {line}"])
        assert "Tensor-likes" not in text(r) and "Mismatched elements" not in text(r)
        assert out.read_bytes() == before
    r = run(pytester, "--golden-regen")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines([f"golden 'out' regenerated: golden/test_k/test_layout/_/out.npz ({line})"])
    run(pytester).assert_outcomes(passed=1)
    monkeypatch.delenv("GOLDEN_LAYOUT")
    r = run(pytester, "--golden-regen-all")
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(["golden (regen-all): 1 checks, 0 created, 1 rewritten", "*rewritten*out.npz*"])
    assert out.read_bytes() == before


@pytest.mark.skipif(os.name == "nt", reason="POSIX symlinks and FIFOs")
def test_links_and_fifos_are_never_followed_by_a_run(pytester, tmp_path_factory):
    """--golden-regen-all used to write through a symlinked directory, and a FIFO hung the check forever."""
    project(pytester)
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (pytester.path / "golden").mkdir()
    (pytester.path / "golden/test_k").symlink_to(elsewhere, target_is_directory=True)
    r = run(pytester, "--golden-regen-all")
    r.assert_outcomes(failed=2)
    r.stdout.fnmatch_lines(["*golden directory */golden/test_k is a symlink (-> *elsewhere*); goldens are read and "
                            "written only as regular files in real directories*"])
    assert list(elsewhere.iterdir()) == [], "nothing may be written through the link"

    (pytester.path / "golden/test_k").unlink()
    (pytester.path / "golden").rmdir()
    (pytester.path / "golden").symlink_to(elsewhere, target_is_directory=True)
    r = run(pytester, "--golden-regen-all")
    r.assert_outcomes(failed=2)
    r.stdout.fnmatch_lines(["*golden dir */golden is a symlink (-> *elsewhere*)*"])
    assert list(elsewhere.iterdir()) == []

    (pytester.path / "golden").unlink()
    run(pytester, "--golden-regen-all").assert_outcomes(passed=2)
    (pytester.path / OUT).unlink()
    os.mkfifo(pytester.path / OUT)
    for flags in ((), ("--golden-regen",), ("--golden-regen-all",)):
        if not flags:  # in a subprocess first: a hang ends in a timeout here instead of hanging the suite
            r = pytester.runpytest_subprocess(timeout=120)
        else:
            r = run(pytester, *flags)
        r.assert_outcomes(failed=1, passed=1)
        r.stdout.fnmatch_lines([f"*golden path */{OUT} is a FIFO, not a golden file: remove it*"])
    assert not (pytester.path / OUT).is_file()


def test_bad_names_and_collisions(pytester):
    project(pytester, '''
import pytest
import torch


def test_escape(golden):
    golden.check("../../outside", torch.zeros(2))


def test_twice(golden):
    golden.check("out", torch.zeros(2))
    golden.check("out", torch.zeros(2))


@pytest.mark.parametrize("p", ["a/b", "a_b"])
def test_clash(golden, p):
    golden.check("out", torch.zeros(2))


class TestA:
    def test_m(self, golden):
        golden.check("out", torch.zeros(2))


class TestB:
    def test_m(self, golden):
        golden.check("out", torch.zeros(2))
''')
    r = run(pytester, "--golden-regen-all")
    r.assert_outcomes(failed=2, passed=2, errors=2)
    for line in ("*ValueError: golden name '../../outside' is not allowed*",
                 "*GoldenError: golden 'out' is checked twice in tests/test_k.py::test_twice; "
                 "use distinct names",
                 "golden directory golden/test_k/test_clash/a_b would be shared by 2 tests: "
                 "tests/test_k.py::test_clash[a/b], tests/test_k.py::test_clash[a_b]*"):
        r.stdout.fnmatch_lines([esc(line)])
    assert not (pytester.path / "outside.npz").exists()
    assert not (pytester.path / "golden/outside.npz").exists()
    assert not (pytester.path / "golden/test_k/test_clash").exists()
    # classes keep methods apart: Class.method
    assert (pytester.path / "golden/test_k/TestA.test_m/_/out.npz").is_file()
    assert (pytester.path / "golden/test_k/TestB.test_m/_/out.npz").is_file()


# ---------------------------------------------------------------------------------------- tolerances

TOL_ROWS = '''
[[tolerance]]
op = "golden/k"
dtype = "fp32"
arch = "sm80"
rtol = 0.0
atol = 0.0
note = "test row: the golden/<op> row must win over the kernel row and the defaults"

[[tolerance]]
op = "k"
dtype = "fp32"
arch = "sm80"
rtol = 1.0
atol = 1.0
note = "test row: shadowed by golden/k for goldens"

[[tolerance]]
op = "k2"
dtype = "fp32"
arch = "sm80"
rtol = 0.0
atol = 0.0
note = "test row: no golden/k2 row, so goldens fall back to this kernel row"

[[tolerance]]
op = "k3"
dtype = "e5m2"
arch = "sm80"
max_ulp = 1
note = "test row: an FP8 kernel row with no golden/k3 row and no wildcard row for e5m2 to fall back to"
'''

TOL_TESTS = '''
import pytest
import torch
from harness.tolerances import lookup
from test_k import floats


def test_default(golden):
    golden.check("out", floats())


@pytest.mark.harness_op("k")
def test_golden_row(golden):
    golden.check("out", floats())


@pytest.mark.harness_op("k2")
def test_kernel_row(golden):
    golden.check("out", floats())


def test_explicit(golden):
    golden.check("out", floats(), tol=lookup("default", "fp32", "sm90"))


def test_fp8_no_row(golden):
    golden.check("codes", torch.tensor([1, 2, 3], dtype=torch.uint8), fmt="e5m2")


@pytest.mark.harness_op("k3")
def test_fp8_kernel_row(golden):
    codes = torch.tensor([1, 2, 3], dtype=torch.uint8)
    codes[1] += int(__import__("os").environ.get("GOLDEN_SHIFT", "0"))
    golden.check("codes", codes, fmt="e5m2")


def test_ints(golden):
    x = torch.arange(5)
    x[2] += int(__import__("os").environ.get("GOLDEN_SHIFT", "0"))
    golden.check("idx", x)
'''


def test_tolerance_rule_same_arch_exact_cross_arch_table(pytester):
    project(pytester, extra="harness_tolerance_files = tol.toml")
    (pytester.path / "tol.toml").write_text(TOL_ROWS)
    (pytester.path / "tests" / "test_tol.py").write_text(TOL_TESTS)
    sel = ["tests/test_tol.py", "--harness-arch=sm90"]
    run(pytester, *sel, "--golden-regen-all").assert_outcomes(passed=7)

    # same arch: bit-exact for all but the explicit tol=
    r = run(pytester, *sel, "-rA", shift=1)
    r.assert_outcomes(failed=5, passed=2)
    outcomes = {line.split(" ")[1].split("::")[-1]: line.split(" ")[0] for line in r.outlines
                if line.startswith(("PASSED", "FAILED"))}
    assert outcomes == {"test_default": "FAILED", "test_golden_row": "FAILED", "test_kernel_row": "FAILED",
                        "test_explicit": "PASSED", "test_fp8_no_row": "PASSED", "test_fp8_kernel_row": "FAILED",
                        "test_ints": "FAILED"}
    r.stdout.fnmatch_lines(["*tolerance: exact (integer/bool tensors)", "*Mismatched elements: 1 / 5 (20.0%)",
                            esc("*(2,)  3  2")])

    # another arch: the table decides
    r = run(pytester, "tests/test_tol.py", "--harness-arch=sm80", "-rA", shift=1)
    outcomes = {line.split(" ")[1].split("::")[-1]: line.split(" ")[0] for line in r.outlines
                if line.startswith(("PASSED", "FAILED"))}
    assert outcomes == {"test_default": "PASSED", "test_golden_row": "FAILED", "test_kernel_row": "FAILED",
                        "test_explicit": "PASSED", "test_fp8_no_row": "FAILED", "test_fp8_kernel_row": "PASSED",
                        "test_ints": "FAILED"}
    r.stdout.fnmatch_lines([esc("*tolerance: Tolerance(rtol=0.0e+00, atol=0.0e+00) [golden/k/fp32/sm80] "
                                "(cross-arch (sm90 -> sm80))")])
    r.stdout.fnmatch_lines([esc("*tolerance: Tolerance(rtol=0.0e+00, atol=0.0e+00) [k2/fp32/sm80] "
                                "(cross-arch (sm90 -> sm80))")])
    r.stdout.fnmatch_lines(["*golden was generated on sm90, running on sm80, and the tolerance table has no "
                            "row for it: add op 'golden/default' (or 'default') dtype 'e5m2' arch 'sm80'*"])


# -------------------------------------------------------------------------------------------- CI

@pytest.mark.parametrize("flag", ["--golden-regen", "--golden-regen-all"])
def test_ci_refuses_to_write(pytester, monkeypatch, flag):
    project(pytester)
    monkeypatch.setenv("CI", "true")
    r = run(pytester, flag)
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines([f"*{flag}: refusing to write golden files because the environment variable CI is "
                            f"set (CI='true')*"])
    assert not (pytester.path / "golden").exists()


def test_ci_missing_golden_says_it_is_never_created(pytester, monkeypatch):
    project(pytester)
    monkeypatch.setenv("CI", "1")
    r = run(pytester)
    r.assert_outcomes(failed=2)
    r.stdout.fnmatch_lines(["Goldens are never created in CI (CI is set); create it locally and commit it:",
                            "    python -m harness golden regen tests/test_k.py::test_float"])
    assert not (pytester.path / "golden").exists()
    monkeypatch.setenv("CI", "false")  # an explicit false is not CI
    run(pytester, "--golden-regen-all").assert_outcomes(passed=2)


# ------------------------------------------------------------------------------------------ unused

EXTRA = '''
import os

import pytest
import torch


def test_extra(golden):
    golden.check("kept", torch.ones(3))
    if os.environ.get("GOLDEN_EXTRA"):
        golden.check("dropped", torch.ones(3))


def test_skipped(golden):
    if os.environ.get("GOLDEN_SKIP"):
        pytest.skip("not on this lane")
    golden.check("gpu_only", torch.ones(3))
'''


def test_unused_only_on_a_whole_suite_run(pytester, monkeypatch):
    project(pytester)
    (pytester.path / "tests" / "test_extra.py").write_text(EXTRA)
    monkeypatch.setenv("GOLDEN_EXTRA", "1")
    run(pytester, "--golden-regen-all").assert_outcomes(passed=4)
    monkeypatch.delenv("GOLDEN_EXTRA")
    stale = pytester.path / "golden/test_gone/test_old/_/out.npz"
    stale.parent.mkdir(parents=True)
    stale.write_bytes((pytester.path / OUT).read_bytes())  # a copy of a generated golden

    r = run(pytester, "--golden-unused=warn")
    r.assert_outcomes(passed=4)
    assert r.ret == 0
    r.stdout.fnmatch_lines(["2 golden file(s) used by no test (--golden-unused=warn):",
                            "  golden/test_extra/test_extra/_/dropped.npz",
                            "  golden/test_gone/test_old/_/out.npz"])
    r = run(pytester, "--golden-unused=fail", "tests")  # an explicit path that covers testpaths is whole
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(["2 golden file(s) used by no test (--golden-unused=fail):"])

    # a failing or skipped test may not have reached its checks: its goldens are not judged
    monkeypatch.setenv("GOLDEN_SKIP", "1")
    r = run(pytester, "--golden-unused=warn", shift=1)
    r.assert_outcomes(passed=1, failed=2, skipped=1)
    r.stdout.fnmatch_lines(["2 golden file(s) used by no test (--golden-unused=warn):"])
    monkeypatch.delenv("GOLDEN_SKIP")

    # narrower selections are silent
    narrower = (["-k", "test_float"], ["-m", "not slow"], ["tests/test_k.py"],
                ["tests/test_k.py::test_float", "tests/test_extra.py"],
                ["--deselect", "tests/test_k.py::test_fp8"])
    for args in narrower:
        r = run(pytester, "--golden-unused=fail", *args)
        assert "used by no test" not in text(r), args
        assert r.ret == 0, args

    stale.unlink()
    (pytester.path / "golden/test_extra/test_extra/_/dropped.npz").unlink()
    r = run(pytester, "--golden-unused=fail")
    assert r.ret == 0 and "used by no test" not in text(r)


def test_loaded_goldens_count_as_used(pytester):
    project(pytester, KERNELS + '''

def test_reader(golden):
    codes, meta = golden.load("codes", test="test_fp8")
    assert codes.dtype == torch.float8_e4m3fn and meta["name"] == "codes"
    out, _ = golden.load("out", test="test_k::test_float")
    assert out.shape == (8,)
    with pytest.raises(FileNotFoundError, match="golden regen -k test_nothing"):
        golden.load("x", test="test_nothing")
''')
    run(pytester, "--golden-regen-all", "-k", "not reader").assert_outcomes(passed=2)
    r = run(pytester, "--golden-unused=fail", "-k", "reader")
    r.assert_outcomes(passed=1)
    assert "used by no test" not in text(r)


# ------------------------------------------------------------------------------------------- xdist

XDIST = '''
import os

import pytest
import torch


@pytest.mark.parametrize("n", range(6))
def test_many(golden, n):
    moved = n % 2 * int(os.environ.get("GOLDEN_SHIFT", "0"))  # odd n move with the shift
    golden.check("out", torch.arange(n + 1, dtype=torch.float32) / 3 + moved)
    golden.check("codes", torch.full((n + 1,), n + moved, dtype=torch.uint8), fmt="e4b15")
'''


def test_xdist_workers_share_one_report(pytester):
    """One ``-n 2`` run: the changes, the used set and the outcomes of both workers meet in the controller."""
    pytest.importorskip("xdist")
    project(pytester, XDIST, name="test_x.py")
    run(pytester, "--golden-regen-all", shift=1).assert_outcomes(passed=6)
    stale = pytester.path / "golden/test_x/test_many/9/out.npz"
    stale.parent.mkdir()
    stale.write_bytes((pytester.path / "golden/test_x/test_many/0/out.npz").read_bytes())

    r = pytester.runpytest_subprocess("-n", "2", "--golden-regen-all", "--golden-changes=changes.json",
                                      "--golden-unused=fail")
    r.assert_outcomes(passed=6)
    assert r.ret == pytest.ExitCode.TESTS_FAILED  # only because of the unused golden
    r.stdout.fnmatch_lines(["golden (regen-all): 12 checks, 0 created, 6 rewritten",
                            "1 golden file(s) used by no test (--golden-unused=fail):",
                            "  golden/test_x/test_many/9/out.npz"])
    data = json.loads((pytester.path / "changes.json").read_text())
    assert data["checked"] == 12
    assert [c["path"] for c in data["changes"]] == [
        f"golden/test_x/test_many/{n}/{name}.npz" for n in (1, 3, 5) for name in ("codes", "out")]
    assert {c["action"] for c in data["changes"]} == {"rewritten"}


# ----------------------------------------------------------------------------------------- command

NEW = '''
import torch


def test_new(golden):
    golden.check("fresh", torch.ones(4, dtype=torch.bfloat16))
'''


def test_regen_command(pytester):
    project(pytester)
    run(pytester, "--golden-regen-all").assert_outcomes(passed=2)
    (pytester.path / "tests" / "test_new.py").write_text(NEW)
    os.environ["GOLDEN_SHIFT"] = "2"
    try:
        r = pytester.run(sys.executable, "-m", "harness", "golden", "regen", "--changes", "changes.json",
                         "-k", "not nothing")
    finally:
        del os.environ["GOLDEN_SHIFT"]
    assert r.ret == 0, text(r)
    r.stdout.fnmatch_lines([
        "running: * -m pytest -p harness.golden.plugin --golden-regen-all --golden-changes=*changes.json -k "
        "'not nothing'",
        "*3 passed*",
        "golden regen: 3 checks, 1 created, 2 rewritten, 0 unchanged",
        f"  rewritten  {OUT} * 1 / 8 elements changed, worst abs *",
        f"  rewritten  {CODES} * 1 / 8 elements changed, worst 2 ulp, worst abs *",
        "  created    golden/test_new/test_new/_/fresh.npz  4 elements (missing)",
    ])
    assert (pytester.path / "golden/test_new/test_new/_/fresh.npz").is_file()
    data = json.loads((pytester.path / "changes.json").read_text())
    assert [(c["path"], c["action"], c["changed"]) for c in data["changes"]] == [
        (OUT, "rewritten", 1), (CODES, "rewritten", 1),
        ("golden/test_new/test_new/_/fresh.npz", "created", 4)]


def test_command_usage():
    from harness.__main__ import main

    assert main(["golden", "regen", "--help"]) == 0
    assert main(["nonsense"]) == 2


@pytest.mark.parametrize("value", ["lots", "\u00b2"])  # '²'.isdigit() is True, and int('²') raised unnamed
def test_a_golden_size_cap_that_is_no_size_is_a_usage_error(pytester, monkeypatch, value):
    project(pytester)
    monkeypatch.setenv("HARNESS_GOLDEN_MAX_BYTES", value)
    r = run(pytester)
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines([f"ERROR: HARNESS_GOLDEN_MAX_BYTES='{value}': expected a positive int*"])


# ----------------------------------------------------------------------------------- path options

def _no_tests_ran(r: pytest.RunResult) -> None:
    assert r.ret == pytest.ExitCode.USAGE_ERROR, text(r)
    assert "passed" not in r.stdout.str() and "failed" not in r.stdout.str(), "refused at start-up, not at the end"


@pytest.mark.parametrize("flag", ["--golden-changes", "--golden-record"])
@pytest.mark.parametrize("bad, why", [
    ("", "an empty path; expected the path of a file to write*"),
    ("sub", "exists and is not a regular file (a directory)*"),
    ("nope/c.json", "*/nope is not a directory"),
    ("ff", "exists and is not a regular file (a FIFO)*"),
])
def test_a_path_option_that_cannot_be_written_is_a_usage_error_at_start_up(pytester, flag, bad, why):
    """These were taken for "off" (empty), or cost a traceback after the whole run (a directory, a missing
    parent), or hung at the end (a FIFO)."""
    project(pytester)
    (pytester.path / "sub").mkdir()
    if hasattr(os, "mkfifo"):
        os.mkfifo(pytester.path / "ff")
    elif bad == "ff":
        pytest.skip("POSIX FIFOs")
    r = pytester.runpytest_subprocess(f"{flag}={bad}", timeout=120)
    _no_tests_ran(r)
    r.stderr.fnmatch_lines([f"ERROR: {flag}={bad}: {why}"])


@pytest.mark.skipif(os.name == "nt", reason="POSIX symlinks")
@pytest.mark.parametrize("flag", ["--golden-changes", "--golden-record"])
def test_a_path_option_never_writes_through_a_symlink(pytester, tmp_path_factory, flag):
    """--golden-changes=link.json overwrote the file the link points to, outside the project (exit 0)."""
    project(pytester)
    victim = tmp_path_factory.mktemp("elsewhere") / "precious.txt"
    victim.write_text("precious\n")
    (pytester.path / "link.json").symlink_to(victim)
    r = run(pytester, f"{flag}=link.json", "--golden-overwrite-changes" if flag == "--golden-changes" else "-q")
    _no_tests_ran(r)
    r.stderr.fnmatch_lines([f"ERROR: {flag}=link.json: is a symlink (-> *precious.txt); a link is never followed*"])
    assert victim.read_text() == "precious\n" and (pytester.path / "link.json").is_symlink()


def test_an_existing_changes_file_is_replaced_only_with_golden_overwrite_changes(pytester):
    """As ``golden regen --changes PATH`` does: a file the run did not create is never overwritten unasked."""
    project(pytester)
    mine = pytester.path / "changes.json"
    mine.write_text("mine")
    r = run(pytester, "--golden-regen-all", "--golden-changes=changes.json")
    _no_tests_ran(r)
    r.stderr.fnmatch_lines(["ERROR: --golden-changes=changes.json: the file exists; remove it or pass "
                            "--golden-overwrite-changes to replace it"])
    assert mine.read_text() == "mine" and not (pytester.path / "golden").exists()
    r = run(pytester, "--golden-regen-all", "--golden-changes=changes.json", "--golden-overwrite-changes")
    r.assert_outcomes(passed=2)
    assert json.loads(mine.read_text())["checked"] == 2
    r = run(pytester, "--golden-overwrite-changes")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["ERROR: --golden-overwrite-changes needs --golden-changes=PATH"])
    # a shard's record is replaced on every run of the shard, as --harness-report is
    for _ in range(2):
        run(pytester, "--golden-record=rec.json").assert_outcomes(passed=2)
    assert json.loads((pytester.path / "rec.json").read_text())["golden_dir"] == "golden"


def _outside_dirs(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("outside")
    (out / "sweep").mkdir()
    (out / "sweep" / ".data.npz.4000000.abc.tmp").write_bytes(b"x")  # a leftover temp file's name, not ours
    old = out / "sweep" / ".old.npz.x1y2z3ab.tmp"
    old.write_bytes(b"y")
    os.utime(old, (0, 0))
    return {"relative": Path(os.path.relpath(out / "sweep", pytester.path)), "absolute": out / "sweep"}


@pytest.mark.parametrize("how", ["relative", "absolute"])
def test_a_golden_dir_outside_the_rootdir_is_a_usage_error_and_nothing_outside_is_touched(pytester, tmp_path_factory,
                                                                                           how):
    """ini golden_dir = ../outside_g had --golden-regen-all write goldens outside the project, and a plain run
    delete temp files it found there ("removed 1 temp file(s)")."""
    dirs = _outside_dirs(pytester, tmp_path_factory)
    outside = dirs["absolute"]
    before = sorted(p.name for p in outside.iterdir())
    project(pytester, extra=f"golden_dir = {dirs[how]}")
    for args in ((), ("--golden-regen-all",)):
        r = run(pytester, *args)
        _no_tests_ran(r)
        r.stderr.fnmatch_lines([f"ERROR: ini golden_dir: '{dirs[how]}' is {outside}, outside the rootdir *; goldens "
                                f"live in the project: give a directory under the rootdir (default: golden)"])
    assert sorted(p.name for p in outside.iterdir()) == before, "nothing outside the rootdir is written or deleted"


@pytest.mark.skipif(os.name == "nt", reason="POSIX symlinks")
def test_a_golden_dir_linked_outside_fails_its_checks_and_its_temp_files_are_not_swept(pytester, tmp_path_factory):
    """A linked golden dir fails every check naming the link (docs/goldens.md); the session's sweep of leftover
    temp files followed the link and deleted what it found at the other end."""
    outside = _outside_dirs(pytester, tmp_path_factory)["absolute"]
    before = sorted(p.name for p in outside.iterdir())
    (pytester.path / "gl").symlink_to(outside, target_is_directory=True)
    project(pytester, extra="golden_dir = gl")
    for args in ((), ("--golden-regen-all",)):
        r = run(pytester, *args)
        r.assert_outcomes(failed=2)
        assert "interrupted writes" not in r.stdout.str()
    r.stdout.fnmatch_lines(["*golden dir */gl is a symlink (-> *sweep)*"])
    assert sorted(p.name for p in outside.iterdir()) == before


def test_a_golden_dir_inside_the_rootdir_works_however_it_is_written(pytester):
    project(pytester, extra=f"golden_dir = {pytester.path / 'tests' / '..' / 'goldens'}")
    run(pytester, "--golden-regen-all", "--golden-record=rec.json").assert_outcomes(passed=2)
    assert (pytester.path / "goldens" / OUT.split("/", 1)[1]).is_file()
    assert json.loads((pytester.path / "rec.json").read_text())["golden_dir"] == "goldens"
    run(pytester).assert_outcomes(passed=2)


def test_temp_files_of_a_write_killed_mid_way_are_removed_and_reported(pytester):
    """kill -9 during a golden write left ``.<name>.npz.<rand>.tmp`` in golden/ for good (3 times out of 3), and
    --golden-unused did not see it. The next session removes it and says so; a write in progress is left alone."""
    import signal
    import subprocess
    import time

    import harness

    project(pytester)
    run(pytester, "--golden-regen-all").assert_outcomes(passed=2)
    target = pytester.path / OUT
    script = f"""
import os, sys, time
sys.path.insert(0, {str(Path(harness.__file__).parents[1])!r})
from harness.golden import files
os.fsync = lambda fd: time.sleep(600)  # the write hangs after its bytes are out, where a kill leaves the temp file
files._replace_file(__import__("pathlib").Path({str(target)!r}), b"x" * 4096)
"""
    child = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 60
        while not list(target.parent.glob(".*.tmp")) and time.monotonic() < deadline:
            time.sleep(0.05)
        temps = list(target.parent.glob(".*.tmp"))
        assert temps, "the child never started its write"
        r = run(pytester)  # the child is alive: its write is in progress, its temp file is not touched
        r.assert_outcomes(passed=2)
        assert temps[0].exists() and "interrupted writes" not in r.stdout.str()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    left = pytester.path / "golden" / "test_k" / ".old.npz.x1y2z3ab.tmp"  # an older harness's name: by age only
    left.write_bytes(b"y")
    os.utime(left, (time.time() - 3600, time.time() - 3600))
    r = run(pytester)
    r.assert_outcomes(passed=2)
    rels = sorted(p.relative_to(pytester.path).as_posix() for p in (*temps, left))
    r.stdout.fnmatch_lines(["*golden: interrupted writes*",
                            "removed 2 temp file(s) left by golden writes that never finished (a killed run):",
                            *(f"  {rel}" for rel in rels)])
    assert not list((pytester.path / "golden").rglob("*.tmp"))
    run(pytester, "--golden-unused=fail").assert_outcomes(passed=2)
