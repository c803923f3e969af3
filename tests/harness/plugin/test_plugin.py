"""The plugin as pytest plugins are tested: through pytester, in throwaway projects."""

import fnmatch
import json
import os

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")


def test_options_in_one_group_and_markers_registered(pytester):
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*low-precision kernel harness:*", "*--harness-lane*", "*--harness-arch=ARCH*",
                                 "*--harness-lane-independent=*", "*--harness-report=PATH*", "*--harness-seed=N*"])
    result = pytester.runpytest("--markers")
    for m in ("gpu:", "interp_only:", "arch(*names):", "min_arch(name):", "dtype_cases(", "harness_op(name):",
              "tolerance(**fields):", "unreported:", "lane_independent:"):
        result.stdout.fnmatch_lines([f"@pytest.mark.{m}*"])


def test_disabled_with_no_harness(pytester):
    pytester.makepyfile("def test_a(harness_arch): pass")
    result = pytester.runpytest("-p", "no:harness")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'harness_arch' not found*"])


def test_strict_markers_clean(pytester):
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.gpu
        @pytest.mark.harness_op("x")
        @pytest.mark.tolerance(rtol=1)
        def test_a(): pass
        @pytest.mark.arch("sm90")
        @pytest.mark.min_arch("sm80")
        @pytest.mark.interp_only
        def test_b(): pass
        """
    )
    pytester.runpytest("--strict-markers", "--harness-arch=interp").assert_outcomes(skipped=2)


@pytest.mark.lane_independent  # an interpreter-lane session in a child: no device
def test_interp_lane_sets_env_and_device(pytester, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    pytester.makepyfile(
        """
        import os
        def test_a(harness_arch, device):
            assert os.environ["TRITON_INTERPRET"] == "1"
            assert harness_arch.name == "interp" and device == "cpu"
        """
    )
    pytester.runpytest_subprocess("--harness-lane=interp").assert_outcomes(passed=1)


def test_a_nested_session_leaves_the_outer_one_as_it_was(pytester, monkeypatch):
    """A pytester run inside a test is a second session in this process: when it ends, the outer session's
    lane (TRITON_INTERPRET), arch and report collector must be what they were, not reset."""
    from harness import summary
    from harness.session import current_arch

    monkeypatch.setenv("TRITON_INTERPRET", "0")  # as on a GPU lane
    arch, collector = current_arch(), summary.active()
    pytester.makepyfile(
        """
        import os
        from harness.session import current_arch
        def test_inner(harness_arch):
            assert os.environ["TRITON_INTERPRET"] == "1"
            assert current_arch().name == harness_arch.name == "sm80"
        """
    )
    pytester.runpytest("--harness-lane=interp", "--harness-arch=sm80").assert_outcomes(passed=1)
    assert os.environ["TRITON_INTERPRET"] == "0"
    assert current_arch() == arch
    assert summary.active() is collector


def test_gpu_lane_refused_without_gpu(pytester, monkeypatch):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    result = pytester.runpytest_subprocess("--harness-lane=gpu")
    result.stderr.fnmatch_lines(["*--harness-lane=gpu but torch sees no GPU*"])
    assert result.ret != 0


GATING = """
import pytest
@pytest.mark.gpu
def test_gpu(): pass
@pytest.mark.arch("sm90")
def test_hopper(): pass
@pytest.mark.arch("sm80")
def test_ampere(): pass
@pytest.mark.min_arch("sm89")
def test_ada_plus(): pass
@pytest.mark.interp_only
def test_interp(): pass
"""


@pytest.mark.parametrize(
    "arch, passed, reasons",
    [("sm86", ["test_interp", "test_ampere"],
      ["*needs sm90 family (running on sm86)*", "*needs sm89+ (running on sm86)*"]),
     ("sm100", ["test_interp", "test_ada_plus"], ["*needs sm90 family (running on sm100)*"]),
     ("sm90", ["test_interp", "test_hopper", "test_ada_plus"], ["*needs sm80 family (running on sm90)*"]),
     ("interp", ["test_interp"], ["*needs sm90 family (running on interp)*"])],
)
def test_exact_family_and_min_arch_gating(pytester, arch, passed, reasons):
    """On the interpreter lane with an assumed arch: the arch markers follow the arch, the gpu and
    interp_only markers the lane (tests/test_plugin_lane.py has the gpu lane)."""
    pytester.makepyfile(GATING)
    result = pytester.runpytest("-rs", "-v", "--harness-lane=interp", f"--harness-arch={arch}")
    result.stdout.fnmatch_lines(["*needs a GPU (running on the interp lane)*"], consecutive=False)
    for name in passed:
        result.stdout.fnmatch_lines([f"*::{name} PASSED*"])
    result.stdout.fnmatch_lines(reasons, consecutive=False)
    result.assert_outcomes(passed=len(passed), skipped=5 - len(passed))


@pytest.mark.lane_independent  # the variable is the --harness-arch default whatever the lane (interp child)
def test_env_override_of_arch(pytester, monkeypatch):
    monkeypatch.setenv("HARNESS_ARCH", "sm80")
    pytester.makepyfile("def test_a(harness_arch): assert harness_arch.name == 'sm80'")
    pytester.runpytest_subprocess("--harness-lane=interp").assert_outcomes(passed=1)


SEEDS = """
import torch
def test_a(seed, rng): print("SEED", seed, torch.randint(0, 2**30, (1,), generator=rng).item())
def test_b(seed, rng): print("SEED", seed, torch.randint(0, 2**30, (1,), generator=rng).item())
"""


def _seeds(result):
    return sorted(line.split("SEED", 1)[1] for line in result.outlines if "SEED " in line)


@pytest.mark.lane_independent
def test_rng_is_per_node_and_independent_of_selection(pytester):
    """In-process runs, so each test's seed is also held to ``node_seed`` of its node id as this process computes
    it: a seed that mixed in anything of the process (an xdist worker's id, ``hash()`` of a string) differs
    from it. ``node_seed``'s own value, the same in every process, is pinned by
    test_seeds_follow_the_module_file_not_its_folder."""
    from harness.plugin import node_seed, seed_id

    module = pytester.makepyfile(SEEDS).name
    serial = pytester.runpytest("-s", "-p", "no:randomly")
    serial.assert_outcomes(passed=2)
    s = _seeds(serial)
    assert len(s) == 2 and s[0] != s[1]
    want = {node_seed(seed_id(f"{module}::{name}"), 0) for name in ("test_a", "test_b")}
    assert {int(x.split()[0]) for x in s} == want, (s, want)
    again = pytester.runpytest("-s", "-k", "test_b")
    assert _seeds(again)[0] in s  # selection does not move a test's seed
    base = pytester.runpytest("-s", "--harness-seed=1")
    assert set(_seeds(base)).isdisjoint(s)  # the base seed does


def test_tolerance_fixture_resolves_marker_and_override(pytester):
    pytester.makefile(
        ".toml", tol='[[tolerance]]\nop = "my.op"\ndtype = "bf16"\narch = "interp"\nrtol = 0.5\nnote = "m"\n'
    )
    pytester.makeini("[pytest]\nharness_tolerance_files = tol.toml\n")
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.harness_op("my.op")
        def test_row(tolerance):
            t = tolerance(dtype="bf16")
            assert (t.rtol, t.key) == (0.5, "my.op/bf16/interp")
            assert tolerance(dtype="fp16").key == "*/fp16/*"
        @pytest.mark.harness_op("my.op")
        @pytest.mark.tolerance(rtol=0.75)
        def test_override(tolerance):
            t = tolerance(dtype="bf16")
            assert (t.rtol, t.key) == (0.75, "my.op/bf16/interp+override")
        def test_no_op_defaults_like_goldens(tolerance):
            assert tolerance(dtype="bf16").key == "*/bf16/*"
            with pytest.raises(LookupError, match="no dtype"):
                tolerance()
        @pytest.mark.harness_op("fp8_cast")
        def test_kind(tolerance):
            assert tolerance(dtype="fp32").kind == "codes"
            assert tolerance(dtype="fp32", kind="float").key == "*/fp32/*"
            with pytest.raises(KeyError, match="skipped rows of the other kind"):
                tolerance(op="nope", dtype="bf16-e4nv", kind="codes")
        """
    )
    pytester.runpytest("--harness-arch=interp").assert_outcomes(passed=4)


def test_bad_tolerance_file_is_a_usage_error(pytester):
    pytester.makeini("[pytest]\nharness_tolerance_files = missing.toml\n")
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest()
    result.stderr.fnmatch_lines(["*harness_tolerance_files: 'missing.toml' does not exist*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


REPORTING = """
import pytest
from harness import summary
from harness.tolerances import lookup
@pytest.mark.parametrize("i", range(4))
def test_obs(i):
    tol = lookup("fp8_cast", "bf16-e4nv", "sm90")
    summary.record(op="fp8_cast", dtype="bf16-e4nv", arch="sm90", n=100, worst_ulp=0, worst_abs=0.0, tol=tol,
                   passed=True)
    tol = lookup("my.op", "bf16", "sm90")
    summary.record(op="my.op", dtype="bf16", arch="sm90", n=10, worst_abs=0.001 * (i + 1), tol=tol,
                   passed=True, worst_ratio=0.25 * i)
    with summary.suspended():  # a self-test's deliberate failure stays out of the report
        summary.record(op="my.op", dtype="bf16", arch="sm90", n=10, worst_abs=9.0, tol=tol, passed=False)
@pytest.mark.unreported
def test_unreported():
    summary.record(op="my.op", dtype="bf16", arch="sm90", n=10, worst_abs=9.0, passed=False)
"""


@pytest.mark.lane_independent
@pytest.mark.parametrize("workers", [None, "2"])
def test_report_table_json_and_junit(pytester, workers):
    pytester.makepyfile(REPORTING)
    args = ["--harness-report=rep.json", "--junitxml=j.xml"]
    # one process runs in this one; under xdist the workers' observations travel to the controller
    result = pytester.runpytest_subprocess(*args, "-n", workers) if workers else pytester.runpytest(*args)
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines([
        "*harness: observed error vs tolerance*",
        "op*dtype*arch*checks*fail*worst ulp*worst abs*tolerance*headroom",
        "fp8_cast*bf16-e4nv*sm90*4*0*0*0*fp8_cast/*/cuda*0 ulp",
        "my.op*bf16*sm90*4*0*-*0.004*/bf16/*25%",
    ])
    rep = json.loads((pytester.path / "rep.json").read_text())
    rows = {(r["op"], r["dtype"]): r for r in rep["rows"]}
    assert rows[("fp8_cast", "bf16-e4nv")]["checks"] == 4
    assert rows[("my.op", "bf16")]["worst_abs"] == pytest.approx(0.004)
    assert len(rep["observations"]) == 8
    assert "harness[fp8_cast/bf16-e4nv/sm90]" in (pytester.path / "j.xml").read_text()


@pytest.mark.parametrize(
    "src, fragment",
    [("@pytest.mark.arch()\ndef test_a(): pass", "*@pytest.mark.arch needs at least one arch name*"),
     ("@pytest.mark.arch('ampere')\ndef test_a(): pass", "*arch 'ampere' is not understood*"),
     ("@pytest.mark.min_arch('sm80', 'sm90')\ndef test_a(): pass", "*min_arch takes exactly one arch name*"),
     ("@pytest.mark.dtype_cases('bf16')\ndef test_a(dtype_case): pass", "*dtype_cases takes keywords src= and fmt=*"),
     ("@pytest.mark.dtype_cases(source='bf16')\ndef test_a(dtype_case): pass", "*dtype_cases got unknown*source*"),
     ("@pytest.mark.harness_op('a', 'b')\ndef test_a(tolerance): pass", "*harness_op takes one op name*"),
     ("@pytest.mark.tolerance(rtl=1)\ndef test_a(tolerance): tolerance(dtype='bf16')",
      "*unknown Tolerance field(s): rtl*")],
)
def test_marker_misuse_is_reported_with_the_test(pytester, src, fragment):
    pytester.makepyfile("import pytest\n" + src)
    result = pytester.runpytest("--harness-lane=interp")
    assert result.ret != pytest.ExitCode.OK
    lines = result.outlines + result.errlines
    assert any(fnmatch.fnmatch(line, fragment) for line in lines), "\n".join(lines)


@pytest.mark.lane_independent
@pytest.mark.parametrize(
    "args, env, src, fragment",
    [(["--harness-arch=sm900"], None, "", "ERROR: --harness-arch=sm900: arch 'sm900' * (did you mean 'sm90'?)*"),
     (["--harness-arch=sm91"], None, "", "ERROR: --harness-arch=sm91: arch 'sm91' * (did you mean 'sm90'?)*"),
     (["--harness-arch=gfx9999"], None, "", "ERROR: --harness-arch=gfx9999: arch 'gfx9999' *did you mean*"),
     (["--harness-arch=bogus"], None, "", "ERROR: --harness-arch=bogus: arch 'bogus' is not understood*"),
     (["--harness-arch=sm10"], None, "", "ERROR: --harness-arch=sm10: arch 'sm10' is not understood*"),
     ([], "bogus", "", "ERROR: HARNESS_ARCH=bogus: arch 'bogus' is not understood*"),
     ([], None, "@pytest.mark.arch('bogus')\n", "ERROR: *::test_a: @pytest.mark.arch: arch 'bogus' is not*"),
     ([], None, "@pytest.mark.min_arch('sm95')\n", "ERROR: *::test_a: @pytest.mark.min_arch: arch 'sm95' *sm90*")],
)
def test_unknown_archs_are_one_usage_error_naming_where_and_the_known_ones(pytester, monkeypatch, args, env, src,
                                                                          fragment):
    """Misspelt or nonexistent archs were accepted (and the run judged as them) or ended in INTERNALERROR."""
    if env is None:
        monkeypatch.delenv("HARNESS_ARCH", raising=False)
    else:
        monkeypatch.setenv("HARNESS_ARCH", env)
    pytester.makepyfile("import pytest\n" + src + "def test_a(): pass\n")
    result = pytester.runpytest("--harness-lane=interp", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = result.outlines + result.errlines
    assert not any("INTERNALERROR" in line for line in lines), "\n".join(lines)
    matched = [line for line in lines if fnmatch.fnmatch(line, fragment)]
    assert matched and "known archs: interp, cpu, sm30" in matched[0], "\n".join(lines)


@pytest.mark.parametrize("where, why", [("missing/r.json", "is not a directory"), (".", "is a directory")])
def test_a_bad_report_path_is_a_usage_error_at_start(pytester, where, why):
    """A bad --harness-report path turned a passing run into a failure at its end, losing the summary line."""
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest("--harness-lane=interp", f"--harness-report={where}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --harness-report={where}: *{why}*"])
    assert not list(pytester.path.rglob("*.tmp*"))


def test_a_report_that_cannot_be_written_at_the_end_costs_the_report_not_the_run(pytester, monkeypatch):
    from harness.plugin import report

    def full_disk(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report, "write", full_disk)
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest("--harness-lane=interp", "--harness-report=r.json")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["harness: --harness-report=r.json: not written: No space left on device",
                                 "*1 passed*"])


def test_seeds_follow_the_module_file_not_its_folder():
    """Goldens key on the module's file name; its inputs must too, or moving a test module between folders
    silently changes what its goldens were captured from (the QSA store golden recorded this seed)."""
    from harness.plugin import node_seed, seed_id

    moved = "tests/kernels/qsa/test_qsa_golden.py::test_store_golden[bf16]"
    assert seed_id(moved) == seed_id("tests/test_qsa_golden.py::test_store_golden[bf16]")
    assert node_seed(seed_id(moved), 0) == 6058875179925844907
    assert seed_id("test_x.py::test_a") == "tests/test_x.py::test_a"
    assert seed_id(moved) != seed_id("tests/kernels/qsa/test_qsa_golden.py::test_store_golden[fp8]")


# The feature plugins are marked for rewriting and imported in pytest_addoption, before any lane is chosen,
# so the child warns the same on every lane. On the GPU lane the child (lane auto: the GPU) took 30.5 s of
# run C's summed time and checked nothing the interpreter lane does not.
@pytest.mark.lane_independent
def test_loading_the_plugin_warns_nothing(pytester):
    """The feature plugins are marked for assertion rewriting before any is imported: harness.compile imports
    harness.interp.jit, and marking harness.interp only at its own turn warned "Module already imported so cannot
    be rewritten" in every user's run (a fresh process: this one has imported them all already)."""
    pytester.makepyfile("def test_x():\n    assert 1\n")
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error::pytest.PytestAssertRewriteWarning")
    r.assert_outcomes(passed=1)
