"""The dtype_case fixture: ids, restriction, arch filtering with visible reasons."""

import pytest
import torch  # noqa: F401  (imported here, not first inside a pytester run: torch cannot be imported twice)

pytestmark = [pytest.mark.lane_independent, pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")]

CASES = """
import pytest
def test_all(dtype_case):
    assert dtype_case.id == f"{dtype_case.src_name}-{dtype_case.fmt.name}"
@pytest.mark.dtype_cases(src=["bf16"], fmt=["e4nv", "e4b15"])
def test_some(dtype_case):
    pass
@pytest.mark.harness_op("fp8_cast")
@pytest.mark.dtype_cases(src="fp16", fmt="e4b15")
def test_tol(dtype_case, tolerance):
    assert tolerance().key.startswith("fp8_cast/")
"""


def test_ids_and_order(pytester):
    pytester.makepyfile(CASES)
    result = pytester.runpytest("--collect-only", "-q", "--harness-arch=sm90")
    result.stdout.fnmatch_lines([
        "*test_all[[]fp16-e4nv[]]", "*test_all[[]fp16-e4b15[]]", "*test_all[[]fp16-e5m2[]]",
        "*test_all[[]bf16-e4nv[]]", "*test_all[[]bf16-e4b15[]]", "*test_all[[]bf16-e5m2[]]",
        "*test_all[[]fp32-e4nv[]]", "*test_all[[]fp32-e4b15[]]", "*test_all[[]fp32-e5m2[]]",
        "*test_some[[]bf16-e4nv[]]", "*test_some[[]bf16-e4b15[]]", "*test_tol[[]fp16-e4b15[]]",
    ])


def test_unsupported_cases_skip_with_reason(pytester):
    pytester.makepyfile(CASES)
    result = pytester.runpytest("-rs", "--harness-arch=sm80")
    result.assert_outcomes(passed=8, skipped=4)
    result.stdout.fnmatch_lines(["*e4nv needs sm89+ (running on sm80)*"])


def test_bad_restriction_is_an_error(pytester):
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.dtype_cases(fmt=["e4m3x"])
        def test_a(dtype_case): pass
        """
    )
    result = pytester.runpytest("--harness-arch=sm90")
    result.stdout.fnmatch_lines(["*dtype_cases(fmt=...): 'e4m3x' is not one of e4nv, e4b15, e5m2*"])
    assert result.ret != 0
