"""Launch capture compiles kernels built by ``exec`` (issue 40): Triton's test_core makes most binary-op, math and
reduction kernels so (``patch_kernel``: a template's source edited, then ``exec``-ed under the interpreter), and
capture listed them ``not captured`` ("@jit functions should be defined in a Python file")."""

from __future__ import annotations

import pytest

# Imported before any in-process pytester run: pytester restores sys.modules afterwards, and a second import of
# triton's native extension in one process aborts.
import triton
import triton.compiler  # noqa: F401
import triton.language as tl  # noqa: F401

from harness.interp import exec_source
from tests.harness.compile.reported import run_reported

pytestmark = [pytest.mark.lane_independent, pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")]

_KERNELS = '''
import inspect
import textwrap

import triton
import triton.language as tl


@triton.jit
def template(x_ptr, y_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)
    tl.store(y_ptr + o, GENERATE_TEST_HERE)


def patch_kernel(template, to_replace):
    """test_core's, as it runs under the interpreter."""
    local_namespace = {}
    src = textwrap.dedent(inspect.getsource(template.fn))
    for k, v in to_replace.items():
        src = src.replace(k, v)
    exec(src, globals(), local_namespace)
    return local_namespace[template.fn.__name__]
'''

_TESTS = '''
import torch
from kern import patch_kernel, template


def test_double():
    kernel = patch_kernel(template, {"GENERATE_TEST_HERE": "x * 2"})
    x = torch.arange(64, dtype=torch.float16)
    y = torch.empty_like(x)
    kernel[(1,)](x, y, BLOCK=64)
    assert torch.equal(y, x * 2)


def test_through_e4b15():
    kernel = patch_kernel(template, {"GENERATE_TEST_HERE": "x.to(tl.float8e4b15).to(tl.float16)"})
    x = torch.ones(64, dtype=torch.float16)
    y = torch.empty_like(x)
    kernel[(1,)](x, y, BLOCK=64)
    assert torch.equal(y, x)
'''


def test_an_exec_built_kernel_is_captured_compiled_and_its_finding_located(pytester, monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESS_COMPILE_CACHE", str(tmp_path / "cache"))
    pytester.makepyfile(kern=_KERNELS, test_kern=_TESTS)
    result, rep = run_reported(pytester, tmp_path, "--harness-compile-launches", "--harness-targets=sm80")
    assert "not captured" not in result.stdout.str()
    assert rep["captured_launches"] == {"test_kern.py::test_double": 1, "test_kern.py::test_through_e4b15": 1}
    # the doubling compiles; the e4b15 one fails as the seed regression does, in its bf16 variant, at the line of
    # the exec'd text as written to the compile cache (line 5: the tl.store)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*kern.template @ sm80: variant x_ptr=bf16 (the launch as run compiles) fails to "
                                 "compile [[]refused[]]*",
                                 "*error: at *.py:5:24 `tl.store(y_ptr + o, x.to(tl.float8e4b15).to(tl.float16))`*"])
    written = sorted((tmp_path / "cache" / "exec").glob("*.py"))
    assert len(written) == 2 and any("x * 2" in p.read_text() for p in written)


def _defined_by_exec(text: str, holder: str = ""):
    """A function ``exec``-ed from ``text`` under the interpreter's ``@triton.jit`` (``holder``: a second string in
    the calling frame, which must not be taken for the source)."""
    ns: dict = {}
    exec(text, {"triton": triton, "tl": tl}, ns)
    return ns["k"]


def test_only_a_text_that_compiles_to_the_kernel_is_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESS_COMPILE_CACHE", str(tmp_path / "cache"))
    text = "@triton.jit\ndef k(x_ptr):\n    tl.store(x_ptr, 1)\n"
    fn = _defined_by_exec(text, holder=text.replace("1)", "2)"))
    assert exec_source.source_of(fn.fn) == text
    made = exec_source.with_file(fn.fn)
    assert made.__code__.co_filename.endswith(".py") and open(made.__code__.co_filename).read() == text
    # a function whose code has a file is its own, and one whose text was not kept stays as it is
    assert exec_source.with_file(test_only_a_text_that_compiles_to_the_kernel_is_kept) is \
        test_only_a_text_that_compiles_to_the_kernel_is_kept
    ns: dict = {}
    exec(compile("def k():\n    return 3\n", "<string>", "exec"), {}, ns)
    assert exec_source.source_of(ns["k"]) is None and exec_source.with_file(ns["k"]) is ns["k"]
