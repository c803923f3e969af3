"""``python -m harness mutate`` end to end on a scratch project: the record run picks the tests that launched the
kernel, a mutant a test catches is killed, one no test catches is reported with its line and diff, a declared
equivalent mutant is not a survivor, and bad arguments are usage errors naming the argument."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.__main__ import main

# the children run the interpreter on CPU tensors whatever the lane: nothing here touches a device
pytestmark = pytest.mark.lane_independent

ROOT = Path(__file__).resolve().parents[3]

KERNEL = '''import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)
'''

TESTS = '''import torch

from relu import relu_kernel


def test_relu():
    x = torch.tensor([-2.0, -1.0, 0.5, 3.0, -0.25, 1.5, -7.0, 2.0])
    y = torch.empty_like(x)
    relu_kernel[(1,)](x, y, 8, BLOCK=8)
    assert y.tolist() == [0.0, 0.0, 0.5, 3.0, 0.0, 1.5, 0.0, 2.0]


def test_no_kernel():
    assert 1 + 1 == 2
'''


def project(tmp_path: Path) -> Path:
    (tmp_path / "relu.py").write_text(KERNEL)
    (tmp_path / "test_relu.py").write_text(TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    return tmp_path


def mutate(cwd: Path, *args: str, tests: str = "test_relu.py") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    return subprocess.run([sys.executable, "-m", "harness", "mutate", *args, "--", "-p", "no:hypothesispytest",
                           "-p", "no:randomly", tests], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_killed_survivor_and_the_tests_that_launched_the_kernel(tmp_path):
    p = mutate(project(tmp_path), "relu.py::relu_kernel", "--kinds", "min-max,mask-compare", "--json", "out.json")
    assert p.returncode == 1, p.stdout + p.stderr
    report = json.loads((tmp_path / "out.json").read_text())
    got = {(o["line"], o["kind"], o["status"], o["tests"]) for o in report["outcomes"]}
    # n == BLOCK in the only launch: offs <= n masks the same lanes as offs < n
    assert got == {(9, "min-max", "killed", 1), (8, "mask-compare", "survived", 1),
                   (9, "mask-compare", "survived", 1)}
    assert report["kill_rate"] == pytest.approx(1 / 3)
    assert ("SURVIVED: relu.py:8:" in p.stdout and "-    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)\n"
            "+    x = tl.load(x_ptr + offs, mask=offs <= n, other=0.0)" in p.stdout), p.stdout
    assert (tmp_path / "relu.py").read_text() == KERNEL, "the user's file was changed"


WIDEN = '''import triton
import triton.language as tl


@triton.jit
def widen_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    h = x.to(tl.float16).to(tl.float32)
    tl.store(y_ptr + 2 * offs[:, None] + tl.arange(0, 2)[None, :], tl.join(h, x))
'''

WIDEN_TESTS = '''from harness.compile.matrix import assert_compiles
from widen import widen_kernel


def test_compiles():
    assert_compiles(widen_kernel, signature={"x_ptr": "*fp32", "y_ptr": "*fp32"}, constexprs={"BLOCK": 8},
                    target="sm90")
'''


def test_a_test_that_only_compiles_the_kernel_is_one_of_its_tests(tmp_path):
    """Without the drop, tl.join takes two fp32 tensors; with it an fp16 and an fp32, which Triton's compiler
    refuses (tt.join wants one type) for every target. Only a compile shows it: the test launches nothing."""
    (tmp_path / "widen.py").write_text(WIDEN)
    (tmp_path / "test_widen.py").write_text(WIDEN_TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    p = mutate(tmp_path, "widen.py::widen_kernel", "--kinds", "drop-f32", "--json", "out.json", tests="test_widen.py")
    report = json.loads((tmp_path / "out.json").read_text())
    got = [(o["line"], o["status"], o["tests"], o["killed_by"]) for o in report["outcomes"]]
    assert got == [(9, "killed", 1, "test_widen.py::test_compiles")], p.stdout + p.stderr
    assert p.returncode == 0, p.stdout + p.stderr


def test_a_mutant_runs_the_fastest_test_first_and_then_the_ones_that_killed(tmp_path):
    (project(tmp_path) / "test_relu.py").write_text(TESTS.replace("def test_relu():", "def test_slow():\n"
                                                                   "    import time\n    time.sleep(1.5)\n"
                                                                   "    test_relu()\n\n\ndef test_relu():"))
    p = mutate(tmp_path, "relu.py::relu_kernel", "--kinds", "min-max", "--json", "out.json")
    report = json.loads((tmp_path / "out.json").read_text())
    got = [(o["kind"], o["status"], o["killed_by"]) for o in report["outcomes"]]
    # collection order would run test_slow first, and -x would stop there (it fails on the mutant too)
    assert got == [("min-max", "killed", "test_relu.py::test_relu")], p.stdout + p.stderr


def test_the_tests_that_killed_a_kernels_mutants_run_first_for_its_next(tmp_path, monkeypatch):
    from harness.mutate import runner
    from harness.mutate.mutations import Mutant

    seen = []

    def fake(m, tests, pytest_args, timeout, workdir):
        seen.append((m.kernel, list(tests)))
        return runner.Outcome(m, "killed", len(tests), 0.0, "", "t::c" if m.kernel == "k" else "")

    monkeypatch.setattr(runner, "run_mutant", fake)
    ms = [Mutant("f.py", k, i, 0, "min-max", "", "", None) for i, k in enumerate(["k", "k", "other"])]
    tests = ["t::a", "t::b", "t::c"]
    runner.run_all([(m, tests) for m in ms], [], jobs=1, timeout=1, workdir=tmp_path,
                   test_seconds={"t::a": 3.0, "t::b": 1.0, "t::c": 2.0})
    assert seen == [("k", ["t::b", "t::c", "t::a"]),  # the fastest first
                    ("k", ["t::c", "t::b", "t::a"]),  # t::c killed the first mutant of k
                    ("other", ["t::b", "t::c", "t::a"])]  # kills count per kernel


def test_declared_equivalent_mutants_are_not_survivors(tmp_path):
    marker = "  # harness: equivalent-mutant(mask-compare): n == BLOCK in every launch"
    (project(tmp_path) / "relu.py").write_text(KERNEL.replace(
        "other=0.0)\n", f"other=0.0){marker}\n").replace("mask=offs < n)\n", f"mask=offs < n){marker}\n"))
    p = mutate(tmp_path, "relu.py::relu_kernel", "--kinds", "mask-compare", "--json", "out.json")
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads((tmp_path / "out.json").read_text())
    got = {(o["line"], o["kind"], o["status"], o["declared"]) for o in report["outcomes"]}
    assert got == {(8, "mask-compare", "declared", "n == BLOCK in every launch"),
                   (9, "mask-compare", "declared", "n == BLOCK in every launch")}
    assert "2 mutants: 0 killed (0 by timeout), 0 survived, 2 declared equivalent" in p.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["relu.py"], "target 'relu.py': expected PATH::KERNEL"),
    (["nofile.py::k"], "target 'nofile.py::k': no file 'nofile.py'"),
    (["relu.py::nope"], "relu.py::nope: no @triton.jit function 'nope'"),
    (["relu.py::relu_kernel", "--kinds", "maxmin"], "argument --kinds: expected kinds among"),
    (["relu.py::relu_kernel", "--jobs", "0"], "argument --jobs: expected at least 1 process, got 0"),
    (["relu.py::relu_kernel", "--timeout", "-1"], "argument --timeout: expected seconds > 0"),
    (["relu.py::relu_kernel", "--json", "nodir/out.json"], "nodir is not a directory"),
    (["relu.py::relu_kernel", "--json", "out.json", "--list"], "--json: --list runs nothing and writes no report"),
    (["relu.py::relu_kernel", "-k", "x"], "unrecognized arguments: -k x (pytest's arguments go after --)"),
    (["--list"], "--list needs PATH::KERNEL targets"),
])
def test_bad_arguments_are_usage_errors_naming_them(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(project(tmp_path))
    assert main(["mutate", *args]) == 2
    assert message in capsys.readouterr().err


def test_a_json_path_that_cannot_take_the_report_is_refused_before_the_run(tmp_path, monkeypatch, capsys):
    """``--json sub`` (a directory) passed the start-up check and lost the report after the whole run; a linked
    ``--json`` had its target written over; a non-UTF-8 target was a raw UnicodeDecodeError."""
    monkeypatch.chdir(project(tmp_path))
    (tmp_path / "sub").mkdir()
    (tmp_path / "victim.txt").write_text("keep")
    (tmp_path / "l.json").symlink_to(tmp_path / "victim.txt")
    (tmp_path / "latin.py").write_bytes(b"\xff\xfe\x00")
    for args, message in ((["--json", "sub"], "--json sub: is a directory"),
                          (["--json", "l.json"], "--json l.json: is a symbolic link"),
                          (["latin.py::k", "--list"], "latin.py::k: the file is not UTF-8 Python source")):
        assert main(["mutate", *args, *([] if "--list" in args else ["relu.py::relu_kernel", "--", "x.py"])]) == 2
        err = capsys.readouterr().err
        assert message in err, err
    assert (tmp_path / "victim.txt").read_text() == "keep"


def test_list_prints_each_mutant_and_runs_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(project(tmp_path))
    assert main(["mutate", "--list", "relu.py::relu_kernel", "--kinds", "min-max"]) == 0
    out = capsys.readouterr().out
    assert out == ("relu.py:9:27:min-max in relu_kernel\n--- a/relu.py\n+++ b/relu.py\n@@ -9 +9 @@\n"
                   "-    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)\n"
                   "+    tl.store(y_ptr + offs, tl.minimum(x, 0.0), mask=offs < n)\n\n1 mutants\n")
