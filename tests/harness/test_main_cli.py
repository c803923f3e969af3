"""``python -m harness``: one argparse tree (help at every level, usage errors exit 2 naming the culprit), and
``golden regen`` forwarding everything it does not know to pytest, in order.

The end-to-end regen run (a real pytest under it) is tests/test_golden_workflow.py::test_regen_command;
here pytest is replaced by a recorder so each command line costs nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import harness.golden.cli as golden_cli
from harness.__main__ import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_pytest(monkeypatch):
    """Replaces the pytest subprocess: records its command line and writes an empty change list."""
    calls: list[list[str]] = []

    def call(cmd):
        calls.append(list(cmd))
        path = next(a.split("=", 1)[1] for a in cmd if a.startswith("--golden-changes="))
        Path(path).write_text(json.dumps({"checked": 3, "changes": []}))
        return 0

    monkeypatch.setattr(golden_cli.subprocess, "call", call)
    return calls


def pytest_part(cmd: list[str]) -> tuple[str, list[str]]:
    """(the regen flag, the arguments after --golden-changes=...) of a recorded command line."""
    assert cmd[1:5] == ["-m", "pytest", "-p", "harness.golden.plugin"], cmd
    assert cmd[6].startswith("--golden-changes="), cmd
    return cmd[5], cmd[7:]


@pytest.mark.parametrize(
    "argv, flag, forwarded",
    [([], "--golden-regen-all", []),
     (["tests/x.py", "-k", "foo"], "--golden-regen-all", ["tests/x.py", "-k", "foo"]),
     (["-k", "not nothing", "tests/b.py::t[a b]", "-n", "2", "--tb=short"], "--golden-regen-all",
      ["-k", "not nothing", "tests/b.py::t[a b]", "-n", "2", "--tb=short"]),
     (["--failed", "tests/x.py", "-x"], "--golden-regen", ["tests/x.py", "-x"]),
     (["tests/x.py", "--failed", "-k", "a"], "--golden-regen", ["tests/x.py", "-k", "a"]),  # anywhere before --
     (["--failed-first", "--fail"], "--golden-regen-all", ["--failed-first", "--fail"]),  # no abbreviations
     (["--", "--failed", "tests/x.py"], "--golden-regen-all", ["--failed", "tests/x.py"]),  # '--' ends regen's
     (["--failed", "--", "-k", "x", "--", "y"], "--golden-regen", ["-k", "x", "--", "y"]),  # only the first '--'
     (["--no-such-pytest-option"], "--golden-regen-all", ["--no-such-pytest-option"])],  # pytest's to refuse
)
def test_regen_forwards_what_it_does_not_know_to_pytest_in_order(fake_pytest, capsys, argv, flag, forwarded):
    assert main(["golden", "regen", *argv]) == 0
    (cmd,) = fake_pytest
    assert pytest_part(cmd) == (flag, forwarded)
    out = capsys.readouterr().out
    assert "golden regen: 3 checks, 0 created, 0 rewritten, 3 unchanged" in out


def test_regen_changes_path_is_kept(fake_pytest, tmp_path):
    keep = tmp_path / "c.json"
    for argv in (["--changes", str(keep), "-k", "x"], [f"--changes={keep}", "-k", "x"]):
        assert main(["golden", "regen", *argv]) == 0
        assert pytest_part(fake_pytest[-1])[1] == ["-k", "x"]
        assert json.loads(keep.read_text())["checked"] == 3
        keep.unlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_regen_never_deletes_or_overwrites_a_changes_file_it_did_not_create(tmp_path, capsys):
    """``--changes PATH`` deleted an existing PATH before pytest ran, so a bad pytest argument lost it. Now an
    existing PATH is refused before pytest runs, unless --overwrite-changes; even then it is replaced only once
    pytest has written the list."""
    keep = tmp_path / "mine.json"
    keep.write_text("not the command's")
    assert main(["golden", "regen", "--changes", str(keep), "--no-such-pytest-option"]) == 2
    assert "golden regen: --changes " + str(keep) + ": the file exists; remove it or pass --overwrite-changes" in (
        capsys.readouterr().err)
    assert keep.read_text() == "not the command's"
    rc = main(["golden", "regen", "--changes", str(keep), "--overwrite-changes", "--no-such-pytest-option",
               "-p", "no:cacheprovider"])
    assert rc != 0 and keep.read_text() == "not the command's"  # pytest refused: nothing to replace it with
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.json"]
    for bad, why in ((tmp_path, "exists and is not a regular file"), (tmp_path / "no" / "c.json", "is not a dir")):
        assert main(["golden", "regen", "--changes", str(bad)]) == 2
        assert why in capsys.readouterr().err
    assert main(["golden", "regen", "--overwrite-changes"]) == 2
    assert "--overwrite-changes needs --changes PATH" in capsys.readouterr().err


def test_regen_overwrites_only_when_asked(fake_pytest, tmp_path):
    keep = tmp_path / "c.json"
    keep.write_text("old")
    assert main(["golden", "regen", "--changes", str(keep), "--overwrite-changes"]) == 0
    assert json.loads(keep.read_text())["checked"] == 3


@pytest.mark.parametrize(
    "argv, usage",
    [([], "usage: python -m harness [-h] COMMAND ..."),
     (["golden"], "usage: python -m harness golden [-h] COMMAND ..."),
     (["golden", "regen"], "usage: python -m harness golden regen [-h] [--failed] [--changes PATH "
                           "[--overwrite-changes]] [--] [pytest args...]"),
     (["compile"], "usage: python -m harness compile [-h] [--sig NAME=TYPE,...]"),
     (["mutate"], "usage: python -m harness mutate [-h] [--jobs N] [--kinds K,...] [--timeout S] [--json PATH] "
                  "[--list] [PATH::KERNEL ...] -- [pytest args]"),
     ],
)
@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_at_every_level(capsys, argv, usage, flag, fake_pytest):
    assert main([*argv, flag]) == 0
    out = capsys.readouterr().out
    assert out.startswith(usage), out
    assert not fake_pytest  # help runs nothing


def test_help_lists_the_commands_and_options(capsys):
    main(["-h"])
    top = capsys.readouterr().out
    assert "golden" in top and "compile" in top
    main(["golden", "regen", "-h"])
    regen = capsys.readouterr().out
    for text in ("--failed", "--changes PATH", "--golden-regen", "forwarded in order"):
        assert text in regen, regen


@pytest.mark.parametrize(
    "argv, message",
    [(["nonsense"], "argument COMMAND: invalid choice: 'nonsense'"),
     (["golden", "regenerate"],
      "argument COMMAND: invalid choice: 'regenerate' (choose from 'regen', 'unused', 'repack')"),
     (["golden", "unused"], "the following arguments are required: RECORD"),
     (["golden", "unused", "r.json", "-k", "x"], "unrecognized arguments: -k x"),
     (["report", "merge", "out.json"], "the following arguments are required: IN"),
     ([], "the following arguments are required: COMMAND"),
     (["golden"], "the following arguments are required: COMMAND"),
     (["--bogus", "golden", "regen"], "unrecognized arguments: --bogus"),
     (["golden", "--bogus", "regen"], "unrecognized arguments: --bogus"),
     (["golden", "regen", "--changes"], "argument --changes: expected one argument"),
     (["compile", "m.py::k", "--sig", "n=i32", "--bogus"], "unrecognized arguments: --bogus")],
)
def test_usage_errors_exit_2_naming_the_argument(capsys, fake_pytest, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "usage: python -m harness" in err, err
    assert not fake_pytest


def test_compile_without_sig_or_warm_names_both(capsys, fake_pytest):
    # --sig is optional for argparse since --warm MANIFEST is the other form; the subcommand names both
    assert main(["compile", "m.py::k"]) == 2
    err = capsys.readouterr().err
    assert "expected MODULE_OR_FILE::KERNEL and --sig NAME=TYPE,... (or --warm MANIFEST)" in err, err
    assert not fake_pytest


def test_python_dash_m_exit_status_and_streams():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    ok = subprocess.run([sys.executable, "-m", "harness", "golden", "regen", "--help"], capture_output=True,
                        text=True, env=env, timeout=60)
    assert ok.returncode == 0 and ok.stdout.startswith("usage: python -m harness golden regen"), ok
    bad = subprocess.run([sys.executable, "-m", "harness", "golden", "nonsense"], capture_output=True, text=True,
                         env=env, timeout=60)
    assert bad.returncode == 2 and "invalid choice: 'nonsense'" in bad.stderr and not bad.stdout, bad
