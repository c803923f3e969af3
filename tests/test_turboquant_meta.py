"""The seed regression tests must catch the seed bug: run them (pytester, in process) against the pre-fix
kernel in tests/known_bad/ and watch exactly the expected ones fail; run them against the shipped kernel and
watch them pass. Two compile targets keep this cheap; the full matrix runs in test_turboquant_seed.py."""

from __future__ import annotations

import difflib
import inspect
import re
from pathlib import Path

import pytest

# Imported before any in-process pytester run: pytester restores sys.modules afterwards, and a second import
# of triton's native extension in one process aborts.
import triton.compiler  # noqa: F401

import kernels.turboquant.store as store

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "tests" / "test_turboquant_seed.py"
KNOWN_BAD = ROOT / "tests" / "known_bad" / "tq_store_prefix.py"
TARGETS = "sm80,sm90"

pytestmark = [pytest.mark.interp_only, pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")]


def _run(pytester, monkeypatch, variant: Path | None):
    if variant is None:
        monkeypatch.delenv("TQ_STORE_VARIANT", raising=False)
    else:
        monkeypatch.setenv("TQ_STORE_VARIANT", str(variant))
    return pytester.runpytest(
        "-c",
        str(ROOT / "pyproject.toml"),
        "--rootdir",
        str(ROOT),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:hypothesispytest",
        f"--harness-targets={TARGETS}",
        "-rf",
        "-q",
        str(SEED),
    )


def _failed(result) -> set[str]:
    return {m.group(1) for ln in result.outlines if (m := re.match(r"FAILED \S+::(\S+)", ln))}


def test_known_bad_differs_only_in_the_key_load():
    real = inspect.getsource(store._store_k8v4_kernel.fn).splitlines()
    text = KNOWN_BAD.read_text(encoding="utf-8")
    bad = text[text.index("@triton.jit") :].rstrip("\n").splitlines()
    changed = [
        ln
        for ln in difflib.unified_diff(real, bad, lineterm="", n=0)
        if ln[:1] in "+-" and not ln.startswith(("+++", "---"))
    ]
    assert len(changed) == 2, "\n".join(changed)
    assert changed[0].strip().startswith("-    k = tl.load(key_ptr") and changed[0].rstrip().endswith(
        ".to(tl.float32)"
    )
    assert changed[1].strip().startswith("+    k = tl.load(key_ptr") and "to(tl.float32)" not in changed[1]


def test_seed_tests_fail_on_the_pre_fix_kernel(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, KNOWN_BAD)
    expected = {f"test_store_compiles_for_target[{t}-bf16-e4b15]" for t in TARGETS.split(",")}
    expected |= {f"test_seed_interp_numerics[{s}-{f}]" for s in ("fp16", "bf16") for f in ("e4nv", "e4b15")}
    assert _failed(result) == expected, result.stdout.str()[-4000:]
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) == 18 - len(expected)
    result.stdout.fnmatch_lines(
        ["*sm80: *caused by AssertionError (at utils.py:*: assert arg.type.scalar.is_fp16()*"]
    )


def test_seed_tests_pass_on_the_shipped_kernel(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, None)
    assert _failed(result) == set(), result.stdout.str()[-4000:]
    result.assert_outcomes(passed=18, skipped=6)
