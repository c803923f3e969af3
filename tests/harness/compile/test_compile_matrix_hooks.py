"""The compile_target fixture, compile_targets marker and --harness-targets option, through pytester.

Collection only (no compiles) except one run that compiles a tiny kernel, so this stays fast.
"""

import pytest

# Imported here, not first inside an in-process pytester run: pytester restores sys.modules after each run,
# and re-importing triton's native extension in the same process aborts.
import triton.backends  # noqa: F401
import triton.compiler  # noqa: F401

pytestmark = [pytest.mark.lane_independent, pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")]

_IDS = """
import pytest

def test_default(compile_target):
    pass

@pytest.mark.compile_targets("sm_90", "100")
def test_marked(compile_target):
    pass
"""


def _run(pytester, *args):
    # hypothesis' plugin re-imports hypothesis (seconds) in every in-process run; nothing here uses it.
    return pytester.runpytest("-p", "no:hypothesispytest", *args)


def _ids(result):
    return sorted(line.split("::", 1)[1] for line in result.outlines if "::" in line)


def test_default_list_and_marker_ids(pytester):
    pytester.makepyfile(_IDS)
    result = _run(pytester, "--collect-only", "-q", "--harness-arch=interp")
    assert _ids(result) == sorted(
        [f"test_default[{t}]" for t in ("sm75", "sm80", "sm86", "sm89", "sm90", "sm100", "sm120")]
        + ["test_marked[sm90]", "test_marked[sm100]"]
    )


def test_option_replaces_default_and_narrows_marker(pytester):
    pytester.makepyfile(_IDS)
    result = _run(pytester, "--collect-only", "-q", "--harness-arch=interp", "--harness-targets=sm80,sm_90")
    assert _ids(result) == ["test_default[sm80]", "test_default[sm90]", "test_marked[sm90]"]


def test_option_disjoint_from_marker_skips_with_reason(pytester):
    pytester.makepyfile(_IDS)
    result = _run(pytester, "-rs", "--harness-arch=interp", "--harness-targets=sm80", "-k", "marked")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        ["*none of --harness-targets is among this test's compile_targets (sm90,sm100)*"]
    )


def test_fixture_value_is_a_target(pytester):
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.compile_targets("sm89")
        def test_a(compile_target):
            assert (compile_target.name, compile_target.cc, compile_target.backend) == ("sm89", 89, "cuda")
        """
    )
    _run(pytester, "--harness-arch=interp").assert_outcomes(passed=1)


@pytest.mark.parametrize(
    "args, match",
    [
        (
            ["--harness-targets=sm80,hopper"],
            "*--harness-targets='sm80,hopper': target 'hopper' is not understood*",
        ),
        (["--harness-targets=,"], "*--harness-targets=',': targets: need at least one target*"),
        (["--harness-targets=sm90,sm91"], "*--harness-targets='sm90,sm91': *cannot compile for sm91*"),
    ],
)
def test_bad_option_is_a_usage_error(pytester, args, match):
    pytester.makepyfile(_IDS)
    result = _run(pytester, "--harness-arch=interp", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([match])


@pytest.mark.parametrize(
    "bad, match",
    [("interp", "*@pytest.mark.compile_targets: target 'interp'*is not a GPU target*"),
     ("sm99", "*@pytest.mark.compile_targets: *cannot compile for sm99*")],
)
def test_bad_marker_target_is_a_usage_error(pytester, bad, match):
    pytester.makepyfile(
        f"""
        import pytest
        @pytest.mark.compile_targets("sm90", "{bad}")
        def test_a(compile_target):
            pass
        """
    )
    result = _run(pytester, "--harness-arch=interp")
    assert result.ret != 0
    result.stdout.fnmatch_lines([match])


def test_marker_and_option_documented(pytester):
    _run(pytester, "--markers").stdout.fnmatch_lines(["@pytest.mark.compile_targets(*targets):*"])
    _run(pytester, "--help").stdout.fnmatch_lines(["*--harness-targets=T1,T2*"])


def test_compile_summary_line(pytester):
    pytester.makepyfile(
        """
        import pytest, triton, triton.language as tl
        from harness.compile.matrix import compile_kernel

        @triton.jit
        def k(x_ptr, B: tl.constexpr):
            tl.store(x_ptr + tl.arange(0, B), tl.arange(0, B).to(tl.float32))

        @pytest.mark.compile_targets("sm80")
        def test_a(compile_target):
            compile_kernel(k, signature={"x_ptr": "*fp32"}, constexprs={"B": 32}, target=compile_target)
            compile_kernel(k, signature={"x_ptr": "*fp32"}, constexprs={"B": 32}, target=compile_target)
        """
    )
    # In-process: this process's counters may already hold other tests' compiles, so only the shape of the
    # line and "at least the one hit made here" are pinned.
    result = _run(pytester, "--harness-arch=interp")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["harness: triton.compile ran * times (* refused, * ptxas failures) in *s (avg *s, slowest *s); "
         "* in-process repeats answered from memory"]
    )
    line = next(ln for ln in result.outlines if ln.startswith("harness: triton.compile ran"))
    assert int(line.rsplit("; ", 1)[1].split()[0]) >= 1
