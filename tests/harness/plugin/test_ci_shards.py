"""``.ci/run`` with ``HARNESS_SHARDS=N/i``: the pytest arguments each lane adds for its shard (pytest-split's
``--splits``/``--group``, plus the golden record and report the judging job merges; the shards themselves are
tested in ``test_shards.py``), none without the variable, and a bad value refused by name."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.lane_independent,
    pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash"),
]

RUN = Path(__file__).resolve().parents[3] / ".ci" / "run"


def _shard_args(shards: str | None, lane: str = "venv", **env: str) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if k not in ("HARNESS_SHARDS", "HARNESS_SHARD_OUT")}
    if shards is not None:
        e["HARNESS_SHARDS"] = shards
    e.update(env)
    return subprocess.run(["bash", str(RUN), "--shard-args", lane], capture_output=True, text=True, env=e,
                          timeout=60)


def test_a_shard_adds_split_group_and_the_files_the_merge_reads():
    p = _shard_args("3/2", "venv-oldest")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["--splits", "3", "--group", "2",
                                     "--golden-record=ci-shards/golden-venv-oldest-2.json",
                                     "--harness-report=ci-shards/report-venv-oldest-2.json"]


def test_the_output_folder_can_be_chosen():
    p = _shard_args("2/1", HARNESS_SHARD_OUT="/tmp/out")
    assert "--golden-record=/tmp/out/golden-venv-1.json" in p.stdout.splitlines()


def test_without_the_variable_a_lane_runs_whole():
    for value in (None, ""):
        p = _shard_args(value)
        assert p.returncode == 0 and p.stdout == ""


@pytest.mark.parametrize("value", ["3", "3/4", "0/0", "3/0", "a/b", "3/1/2", " 3/1"])
def test_a_bad_value_is_refused_by_name(value):
    p = _shard_args(value)
    assert p.returncode == 2
    assert p.stderr.strip() == f"ci: HARNESS_SHARDS={value}: expected N/i, shard i of N with 1 <= i <= N (e.g. 3/1)"
    assert p.stdout == ""
