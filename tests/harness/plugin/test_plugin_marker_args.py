"""Marker arguments are checked at collection on every test that carries the marker, naming the test and the
marker, whichever feature is on and whether or not the test takes the fixture the marker steers."""

import fnmatch

import pytest

pytestmark = pytest.mark.lane_independent  # plugin self-tests: the same on every lane


@pytest.mark.parametrize(
    ("src", "fragment"),
    [("@pytest.mark.dtype_cases(src=1)\ndef test_a(dtype_case): pass",
      "*test_a: @pytest.mark.dtype_cases(src=1): expected a name or a list of names from fp16, bf16, fp32, got int"),
     ("@pytest.mark.mx_cases(src=1)\ndef test_a(mx_case): pass", "*test_a: @pytest.mark.mx_cases(src=1): expected*"),
     ("@pytest.mark.dtype_cases(src=[])\ndef test_a(dtype_case): pass",
      "*test_a: @pytest.mark.dtype_cases(src=[]): selects nothing*"),
     ("@pytest.mark.mx_cases(fmt=[])\ndef test_a(mx_case): pass", "*test_a: @pytest.mark.mx_cases(fmt=[]): selects*"),
     ("@pytest.mark.dtype_cases(fmt='e4m3x')\ndef test_a(): pass", "*test_a: @pytest.mark.dtype_cases(fmt=...)*"),
     ("@pytest.mark.tolerance(rtoll=0.5)\ndef test_a(tolerance): pass",
      "*test_a: @pytest.mark.tolerance: unknown Tolerance field(s): rtoll"),
     ("@pytest.mark.tolerance(rtol=-1)\ndef test_a(tolerance): pass",
      "*test_a: @pytest.mark.tolerance: Tolerance.rtol must be a finite number >= 0*"),
     ("@pytest.mark.tolerance(0.5)\ndef test_a(tolerance): pass", "*test_a: @pytest.mark.tolerance takes fields by*"),
     ("@pytest.mark.tolerance(rtoll=-1)\ndef test_a(): pass", "*test_a: @pytest.mark.tolerance: unknown*rtoll"),
     ("@pytest.mark.tolerance(max_ulp=None, ulp_floor=0.5)\ndef test_a(): pass", "*ulp_floor=0.5 needs max_ulp*"),
     ("@pytest.mark.harness_op('')\ndef test_a(tolerance): pass", "*test_a: @pytest.mark.harness_op takes one op*"),
     ("@pytest.mark.harness_op(1)\ndef test_a(): pass", "*test_a: @pytest.mark.harness_op takes one op name*"),
     ("@pytest.mark.compile_targets('bogus')\ndef test_a(): pass",
      "*test_a: @pytest.mark.compile_targets: target 'bogus' is not understood*"),
     ("@pytest.mark.sanitize(mode='warn', x=1)\ndef test_a(): pass", "*test_a: @pytest.mark.sanitize takes one mode*"),
     ("@pytest.mark.vacuity_ok()\ndef test_a(): pass", "*test_a: @pytest.mark.vacuity_ok needs reason=*"),
     ("@pytest.mark.vacuity_ok(reason='r', corruption=['nan'])\ndef test_a(): pass", "*vacuity_ok takes reason*")],
)
def test_a_bad_marker_is_a_collection_error_naming_test_and_marker(pytester, src, fragment):
    """Each was a raw TypeError, a wrong keyword, one silent skip, a failure at run time naming only Tolerance, or
    accepted where its feature was off (no fixture, --harness-sanitize=off, no --harness-vacuity)."""
    pytester.makepyfile(test_m="import pytest\n" + src + "\n")
    result = pytester.runpytest("--harness-lane=interp", "--harness-sanitize=off")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    lines = result.outlines + result.errlines
    assert any(fnmatch.fnmatch(line, fragment) for line in lines), "\n".join(lines)
    result.assert_outcomes(errors=1)


def test_valid_markers_without_their_fixture_or_feature_still_pass(pytester):
    """What the docs and tests use stays accepted (a false failure is the worst defect)."""
    pytester.makepyfile(test_m="""
        import pytest
        pytestmark = pytest.mark.harness_op("mx.quantize")
        @pytest.mark.dtype_cases(src="fp16", fmt=("e4b15",))
        @pytest.mark.mx_cases(src="bf16", fmt=["mxfp4", "nvfp4"], rule=["floor", "rceil", "nvfp4"])
        @pytest.mark.tolerance(ulp_floor=0.5)
        @pytest.mark.compile_targets("sm80", "sm_90")
        @pytest.mark.sanitize("off")
        @pytest.mark.vacuity_ok(reason="demo", corruptions=["nan"])
        def test_a(): pass
        @pytest.mark.tolerance(rtol=0.75, atol=0)
        @pytest.mark.sanitize(mode="warn")
        @pytest.mark.vacuity_ok("demo")
        def test_b(tolerance): assert tolerance(dtype="bf16").rtol == 0.75
    """)
    pytester.runpytest("--harness-lane=interp").assert_outcomes(passed=2)


def test_getfixturevalue_of_compile_target_says_how_it_is_used(pytester):
    """It raised AttributeError: 'SubRequest' object has no attribute 'param'."""
    pytester.makepyfile(test_m="def test_a(request):\n    request.getfixturevalue('compile_target')\n")
    result = pytester.runpytest("--harness-lane=interp")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the compile_target fixture is parametrized at collection*name it as an argument*"])


@pytest.mark.parametrize(
    ("args", "ini", "fragment"),
    [(["--harness-arch="], "", "ERROR: --harness-arch=: empty; expected an arch name*"),
     (["--harness-widen-targets=bogus"], "", "ERROR: --harness-widen-targets: target 'bogus' is not understood*"),
     (["--harness-widen-targets=sm91"], "", "ERROR: --harness-widen-targets: arch 'sm91' is not understood*"),
     (["--harness-widen-targets=", "--harness-compile-launches"], "",
      "ERROR: --harness-widen-targets: targets: need at least one target*"),
     (["--harness-ptxas-budget=-5"], "", "ERROR: --harness-ptxas-budget='-5': expected seconds >= 0*"),
     (["--harness-ptxas-budget=abc"], "", "ERROR: --harness-ptxas-budget='abc': expected seconds >= 0*"),
     ([], "harness_ptxas_budget = abc", "ERROR: ini harness_ptxas_budget='abc': expected seconds >= 0*"),
     ([], "harness_min_target = sm91", "ERROR: ini harness_min_target='sm91': arch 'sm91' is not understood*"),
     ([], "harness_min_target = gfx942", "ERROR: ini harness_min_target='gfx942': expected a CUDA target*")],
)
def test_bad_option_values_are_usage_errors_whether_or_not_their_feature_is_on(pytester, args, ini, fragment):
    """Each was accepted while launch capture was off (and an empty --harness-arch= detected the arch)."""
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(test_m="def test_a(): pass\n")
    result = pytester.runpytest("--harness-lane=interp", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([fragment])


def test_capture_modifiers_without_capture_stay_valid(pytester):
    """Documented 'with capture' modifiers are no-ops without it: addopts shared by the lanes pass them where
    capture is off (this repo's own --harness-widen-targets=sm80,sm90 on the GPU lane)."""
    pytester.makeini("[pytest]\nharness_min_target = sm80\nharness_ptxas_budget = 30\n")
    pytester.makepyfile(test_m="def test_a(): pass\n")
    result = pytester.runpytest("--harness-lane=interp", "--harness-widen-targets=sm80,sm90", "--harness-no-widen",
                                "--harness-compile-depth=full", "--harness-ptxas-budget=0")
    result.assert_outcomes(passed=1)
