"""Shards for CI fleets (pytest-split's ``--splits N --group i``) with every harness feature, on a small
synthetic project with goldens (pytester, so it runs in seconds):

* the union of the 3 shards' tests is the whole suite, and no test runs twice;
* every shard is silent about unused goldens (each deselects the others' tests), and the merge step
  (``python -m harness golden unused RECORD...``) finds the one unused golden once, as a whole run does;
* the merge step refuses what is not the whole suite (a record missing, a ``-k`` shard);
* the shards' ``--harness-report`` files merge (``python -m harness report merge``) into the rows of one run;
* a shard under xdist records what it does in one process;
* two shards running at once share one launch-capture disk cache (``HARNESS_COMPILE_CACHE``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Imported before any in-process pytester run: pytester drops the modules first imported during a run, and
# torch cannot be imported a second time in one process.
import torch  # noqa: F401

from harness.__main__ import main

pytest_plugins = ["pytester"]
pytestmark = [pytest.mark.lane_independent, pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")]

ROOT = Path(__file__).resolve().parents[3]

INI = """
[pytest]
testpaths = tests
addopts = -p no:cacheprovider -p no:hypothesispytest --harness-lane=interp --golden-unused=fail
"""

GOLDEN_TESTS = '''
import pytest
import torch

from harness import assert_close_tol
from harness.tolerances import Tolerance


@pytest.mark.parametrize("n", range(4))
def test_scaled(golden, n):
    golden.check("out", torch.arange(n + 3, dtype=torch.float32) / (n + 1))


def test_codes(golden):
    golden.check("codes", torch.arange(0, 112, 16, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn))


def test_reader(golden):
    out, _ = golden.load("out", test="test_scaled", param="2")
    assert out.shape == (5,)


def test_close():
    x = torch.linspace(-1, 1, 7)
    assert_close_tol(x / 2, x * 0.5, Tolerance(rtol=1e-6, atol=0.0), op="halve", dtype="fp32")
'''

PLAIN_TESTS = '''
import pytest


@pytest.mark.parametrize("i", range(5))
def test_plain(i):
    assert i >= 0


def test_more_goldens(golden):
    import torch

    golden.check("ones", torch.ones(6, dtype=torch.bfloat16))
'''

STALE = "golden/test_gone/test_old/_/out.npz"


@pytest.fixture(autouse=True)
def _not_ci(monkeypatch):
    """The project's goldens are captured by a regen run, which CI=... refuses (as CI's own run sets it)."""
    monkeypatch.delenv("CI", raising=False)


def project(pytester: pytest.Pytester) -> None:
    """Two test modules (13 tests, 7 with goldens), their goldens, a stale golden no test uses and a
    durations file (as ``pytest --store-durations`` writes it)."""
    pytester.makeini(INI)
    tests = pytester.path / "tests"
    tests.mkdir()
    (tests / "test_g.py").write_text(GOLDEN_TESTS)
    (tests / "test_p.py").write_text(PLAIN_TESTS)
    r = pytester.runpytest("--golden-regen-all", "-k", "not reader")
    r.assert_outcomes(passed=12)
    stale = pytester.path / STALE
    stale.parent.mkdir(parents=True)
    shutil.copy(pytester.path / "golden/test_g/test_scaled/0/out.npz", stale)
    # equal durations: pytest-split cuts the collection order into 5 + 4 + 4 tests, so every shard has goldens,
    # and test_reader loads a golden of test_scaled[2], which runs in another shard
    durations = dict.fromkeys(collect(pytester), 0.5)
    (pytester.path / ".test_durations").write_text(json.dumps(durations, indent=4))


def collect(pytester: pytest.Pytester, *args: str) -> list[str]:
    """The node ids pytest selects with ``args`` (its own listing, independent of the harness' records)."""
    r = pytester.runpytest("--collect-only", "-q", *args)
    return [ln for ln in r.outlines if "::" in ln and not ln.startswith(("=", " "))]


def split(i: int, n: int = 3) -> list[str]:
    return ["--splits", str(n), "--group", str(i), "--durations-path=.test_durations"]


def text(result: pytest.RunResult) -> str:
    return "\n".join(result.outlines + result.errlines)


def unused(capsys: pytest.CaptureFixture[str], root: Path, *records: str) -> tuple[int, str]:
    capsys.readouterr()  # what in-process pytest runs printed
    rc = main(["golden", "unused", "--rootdir", str(root), *(str(root / r) for r in records)])
    return rc, capsys.readouterr().out


def test_three_shards_cover_the_suite_and_an_unused_golden_is_found_once(pytester, capsys):
    project(pytester)
    whole = collect(pytester)
    assert len(whole) == 13
    shards = [collect(pytester, *split(i)) for i in (1, 2, 3)]
    assert all(shards), shards
    assert sorted(n for s in shards for n in s) == sorted(whole), "the shards' union is not the whole suite"

    outputs = []
    for i in (1, 2, 3):
        r = pytester.runpytest(*split(i), f"--golden-record=golden-{i}.json")
        assert r.ret == 0, text(r)  # --golden-unused=fail in addopts: a shard judges nothing
        outputs.append(text(r))
        record = json.loads((pytester.path / f"golden-{i}.json").read_text())
        assert sorted(record["selected"]) == sorted(shards[i - 1])
        assert sorted(record["collected"]) == sorted(whole)
    assert not any(STALE in out or "used by no test" in out for out in outputs)

    rc, out = unused(capsys, pytester.path, "golden-1.json", "golden-2.json", "golden-3.json")
    assert rc == 1, out
    assert out.count(STALE) == 1 and out.count("golden/") == 1, out
    assert out.splitlines() == [
        "golden unused: 3 record(s), 13 tests (7 with goldens), 6 golden file(s) used",
        "1 golden file(s) used by no test of any shard:",
        f"  {STALE}",
    ]

    # the same judgement as one run of the whole suite
    r = pytester.runpytest()
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(["1 golden file(s) used by no test (--golden-unused=fail):", f"  {STALE}"])

    # judged against the checkout at merge time: with the stale file gone the same records pass
    (pytester.path / STALE).unlink()
    rc, out = unused(capsys, pytester.path, "golden-1.json", "golden-2.json", "golden-3.json")
    assert rc == 0 and out.splitlines()[-1] == "every golden file was used", out


def test_the_merge_refuses_what_is_not_the_whole_suite(pytester, capsys):
    project(pytester)
    for i in (1, 2, 3):
        assert pytester.runpytest(*split(i), f"--golden-record=golden-{i}.json").ret == 0
    missing = len(json.loads((pytester.path / "golden-3.json").read_text())["selected"])

    rc, out = unused(capsys, pytester.path, "golden-1.json", "golden-2.json")
    assert rc == 2, out
    assert f"not judged: {missing} of the suite's 13 tests ran in no shard" in out, out
    assert STALE not in out

    # a shard narrowed by -k is not a shard of the whole suite, even when the union covers it
    assert pytester.runpytest(*split(3), "-k", "plain", "--golden-record=narrow.json").ret == 0
    rc, out = unused(capsys, pytester.path, "golden-1.json", "golden-2.json", "golden-3.json", "narrow.json")
    assert rc == 2 and "narrow.json is not a shard of the whole suite (-k given)" in out, out

    # records of another suite (a test added) are refused
    (pytester.path / "tests" / "test_new.py").write_text("def test_new():\n    pass\n")
    assert pytester.runpytest(*split(1), "--golden-record=other.json").ret == 0
    rc, out = unused(capsys, pytester.path, "other.json", "golden-2.json", "golden-3.json")
    assert rc == 2 and "collected different suites (13 and 14 tests; 1 in one only: tests/test_new.py::test_new)" \
        in out, out

    (pytester.path / "junk.json").write_text("{}")
    capsys.readouterr()
    rc = main(["golden", "unused", str(pytester.path / "junk.json")])
    assert rc == 2 and "not a golden record" in capsys.readouterr().err


def _rows(report: dict) -> list[dict]:
    return report["rows"]


def _observations(report: dict) -> list[tuple]:
    return sorted(tuple(sorted(o.items())) for o in report["observations"])


def test_shard_reports_merge_into_the_rows_of_one_run(pytester, capsys):
    project(pytester)
    whole = pytester.runpytest("--golden-unused=off", "--harness-report=whole.json")
    assert whole.ret == 0, text(whole)
    for i in (1, 2, 3):
        assert pytester.runpytest(*split(i), f"--harness-report=r{i}.json").ret == 0
    parts = [json.loads((pytester.path / f"r{i}.json").read_text()) for i in (1, 2, 3)]
    assert all(p["observations"] for p in parts)  # every shard observed something: the merge has work to do

    capsys.readouterr()
    rc = main(["report", "merge", str(pytester.path / "merged.json"), *(str(pytester.path / f"r{i}.json")
                                                                       for i in (1, 2, 3))])
    assert rc == 0
    merged = json.loads((pytester.path / "merged.json").read_text())
    single = json.loads((pytester.path / "whole.json").read_text())
    assert _rows(merged) == _rows(single)
    assert _observations(merged) == _observations(single)
    assert {r["op"] for r in _rows(merged)} == {"golden/default", "halve"}
    assert sum(r["checks"] for r in _rows(merged)) == 7  # 6 golden checks (a load is no check), 1 assert
    assert capsys.readouterr().out.startswith("report merge: 3 report(s), ")

    single["version"] = 2
    (pytester.path / "future.json").write_text(json.dumps(single))
    assert main(["report", "merge", str(pytester.path / "x.json"), str(pytester.path / "r1.json"),
                 str(pytester.path / "future.json")]) == 2
    assert "version 2, this harness merges 1" in capsys.readouterr().err
    assert not (pytester.path / "x.json").exists()


def test_a_shard_under_xdist_records_what_one_process_does(pytester, monkeypatch):
    pytest.importorskip("xdist")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    project(pytester)
    assert pytester.runpytest(*split(2), "--golden-record=one.json").ret == 0
    r = pytester.runpytest_subprocess(*split(2), "-n", "2", "--golden-record=two.json")
    assert r.ret == 0, text(r)
    one, two = (json.loads((pytester.path / f).read_text()) for f in ("one.json", "two.json"))
    for key in ("collected", "selected", "items", "used", "passed", "not_passed", "partial", "exitstatus"):
        assert sorted(one[key]) == sorted(two[key]) if isinstance(one[key], list) else one[key] == two[key], key
    assert two["selected"] and two["used"]


# ------------------------------------------------------------------------------- launch capture's cache

STORE = (ROOT / "tests" / "harness" / "compile" / "widening" / "fp8_store.py").read_text()

LAUNCHES = '''
import torch
import triton.language as tl
from fp8_store import store


def test_shared_{name}():
    assert store(torch.ones(32, dtype=torch.float16), tl.float8e4b15, fixed=True).shape == (32,)


def test_own_{name}():
    assert store(torch.ones(32, dtype=torch.{dtype}), tl.float8e4b15, fixed=True).shape == (32,)
'''


def test_two_shards_at_once_share_one_compile_cache(pytester, tmp_path):
    """Both shards launch one kernel signature of their own and one they share, at the same time, into one
    ``HARNESS_COMPILE_CACHE``; a later run of the whole suite reads every compile back from it."""
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider -p no:hypothesispytest --harness-lane=interp "
                     "--harness-compile-launches --harness-no-widen --harness-targets=sm90\n")
    pytester.makepyfile(fp8_store=STORE)
    pytester.makepyfile(test_a=LAUNCHES.format(name="a", dtype="float32"),
                        test_b=LAUNCHES.format(name="b", dtype="bfloat16"))
    cache = tmp_path / "shared-cache"
    env = {**os.environ, "HARNESS_COMPILE_CACHE": str(cache),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(pytester.path), str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("PYTEST_XDIST_WORKER", None)
    procs = [subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:xdist", "--splits", "2", "--group",
                               str(i), f"--harness-report=r{i}.json"], cwd=pytester.path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in (1, 2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(outs)
    shards = [json.loads((pytester.path / f"r{i}.json").read_text())["compile_launches"] for i in (1, 2)]
    assert [(s["compiles"], s["cells"][0]["failed"]) for s in shards] == [(2, 0), (2, 0)]

    whole = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "--harness-report=whole.json"],
                           cwd=pytester.path, env=env, capture_output=True, text=True, timeout=300)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    launches = json.loads((pytester.path / "whole.json").read_text())["compile_launches"]
    assert launches["compiles"] == 3 and launches["cached"] == 3, launches  # fp16, fp32, bf16: all read back

    # the shards' reports merge; counts add up per shard (the shared fp16 compile counts in both)
    assert main(["report", "merge", str(pytester.path / "m.json"), str(pytester.path / "r1.json"),
                 str(pytester.path / "r2.json")]) == 0
    merged = json.loads((pytester.path / "m.json").read_text())["compile_launches"]
    assert (merged["compiles"], merged["cells"][0]["ok"], merged["findings"]) == (4, 4, [])
    both = {**shards[0]["captured_launches"], **shards[1]["captured_launches"]}
    assert merged["captured_launches"] == dict(sorted(both.items())) and len(both) >= 2, merged
