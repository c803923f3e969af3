"""The mx_case fixture: (source dtype) x (scheme) x (scale rule), ids like bf16-nvfp4, the mx_cases marker, and the
tolerance fixture keyed by the case id."""

import pytest
import torch  # noqa: F401  (imported here, not first inside a pytester run: torch cannot be imported twice)

pytestmark = [pytest.mark.lane_independent, pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")]

CASES = """
import pytest
from harness import tolerances
from harness.tolerances import Tolerance

tolerances.register("mxq", "bf16-nvfp4", "*", Tolerance(max_ulp=1))

def test_all(mx_case):
    q = mx_case.quantize(__import__("torch").ones(2, 32))
    assert len(q) == (3 if mx_case.fmt == "nvfp4" else 2)

@pytest.mark.mx_cases(src="bf16", fmt=["mxfp4", "nvfp4", "mxfp8e4m3"], rule=["floor", "rceil", "nvfp4"])
def test_rules(mx_case):
    pass

@pytest.mark.harness_op("mxq")
@pytest.mark.mx_cases(src="bf16", fmt="nvfp4")
def test_tol(mx_case, tolerance):
    assert tolerance().key == "mxq/bf16-nvfp4/*"
"""


def test_ids_rules_and_tolerance_key(pytester):
    pytester.makepyfile(CASES)
    result = pytester.runpytest("-v", "--harness-arch=sm90", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=12)
    result.stdout.fnmatch_lines([
        "*test_all[[]fp16-mxfp4[]]*", "*test_all[[]fp16-nvfp4[]]*", "*test_all[[]bf16-mxfp4[]]*",
        "*test_all[[]bf16-nvfp4[]]*", "*test_all[[]fp32-mxfp4[]]*", "*test_all[[]fp32-nvfp4[]]*",
        "*test_rules[[]bf16-mxfp4[]]*", "*test_rules[[]bf16-mxfp4-rceil[]]*", "*test_rules[[]bf16-nvfp4[]]*",
        "*test_rules[[]bf16-mxfp8e4m3[]]*", "*test_rules[[]bf16-mxfp8e4m3-rceil[]]*", "*test_tol[[]bf16-nvfp4[]]*",
    ])


@pytest.mark.parametrize("marker, text", [
    ("fmt=['mxfp5']", "*mx_cases(fmt=...): 'mxfp5' is not one of mxfp4, nvfp4, mxfp6e2m3*"),
    ("fmt='nvfp4', rule='floor'", "*mx_cases(rule='floor'): none of the schemes nvfp4 has that rule*"),
    ("scheme='nvfp4'", "*mx_cases takes keywords src=, fmt= and rule= only*"),
])
def test_bad_marker_is_a_usage_error(pytester, marker, text):
    pytester.makepyfile(f"import pytest\n@pytest.mark.mx_cases({marker})\ndef test_a(mx_case): pass\n")
    result = pytester.runpytest("--harness-arch=sm90", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines([text])
    assert result.ret != 0
