"""The launch-outcome disk cache never turns its own problems into the user's failures: an unwritable or damaged
cache is warned about once and compiled around, and an entry is trusted only when it has the schema and names the
launch it is read for."""

from __future__ import annotations

import json
import os
import stat
import warnings
from pathlib import Path

import pytest

from harness.compile import disk_cache as dc
from harness.compile import launches as lc

pytestmark = pytest.mark.lane_independent


def _launch() -> lc.Launch:
    return lc.Launch("m.k", __file__, (("a", "*fp16"),), (), ())


@pytest.fixture
def compiles(monkeypatch):
    """compile_launch replaced by a refusal (a real compile is not the point): the targets it was asked for."""
    calls: list[str] = []
    monkeypatch.setattr(dc, "compile_launch", lambda launch, target, **_: calls.append(target)
                        or dc.Outcome(False, "refused", "refused line"))
    monkeypatch.setattr(dc, "_warned", set(), raising=False)
    return calls


def _entry(tmp_path, launch: lc.Launch, target: str = "sm80"):
    key = dc.cache_key(launch, target)
    return tmp_path / key[:2] / f"{key}.json"


def _outcome_warned_once(launch, directory, calls, match):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        first = dc.launch_outcome(launch, "sm80", directory)
        again = dc.launch_outcome(launch, "sm80", directory)
    assert (first.ok, first.kind, again.ok, again.kind) == (False, "refused", False, "refused")
    mine = [str(w.message) for w in seen if "harness.compile" in str(w.message)]
    assert len(mine) == 1 and match in mine[0], mine
    return first


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_a_read_only_cache_is_compiled_around(tmp_path, compiles):
    """Read-only for this user; root ignores permissions, so there a directory of procfs stands in."""
    if os.geteuid() == 0:
        ro = Path("/proc/self/harness-cache")
        if not Path("/proc/self").is_dir():
            pytest.skip("root, and no procfs to stand in for a read-only directory")
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        _outcome_warned_once(_launch(), ro, compiles, "cannot be written")
    finally:
        if ro.parent == tmp_path:
            ro.chmod(stat.S_IRWXU)
    assert compiles == ["sm80", "sm80"]


def test_a_cache_path_under_a_regular_file_is_compiled_around(tmp_path, compiles):
    f = tmp_path / "file"
    f.write_text("not a directory")
    _outcome_warned_once(_launch(), f / "cache", compiles, "cannot be written")
    assert f.read_text() == "not a directory"


@pytest.mark.parametrize("entry", ["[]", '{"ok": "false"}', "null", '{"ok": true}', "{not json",
                                   '{"ok": false, "kind": "", "line": "", "lowering": "", "kernel": "m.k", '
                                   '"sig": "a=*fp16", "target": "sm80"}',
                                   '{"ok": true, "kind": "", "line": "", "lowering": "", "kernel": "other.k", '
                                   '"sig": "a=*fp16", "target": "sm80"}'])
def test_a_damaged_entry_is_never_trusted(tmp_path, compiles, entry):
    """``{"ok": "false"}`` was read as a compile that worked (``bool("false")``), ``[]`` raised TypeError; an
    entry of another launch, or a failure with no kind, is no outcome of this one. Each is recompiled, warned
    once, and replaced by a good entry."""
    launch = _launch()
    path = _entry(tmp_path, launch)
    path.parent.mkdir(parents=True)
    path.write_text(entry)
    _outcome_warned_once(launch, tmp_path, compiles, "damaged")
    assert compiles == ["sm80"]
    assert json.loads(path.read_text())["kind"] == "refused"


def test_a_good_entry_is_read_back_without_a_warning(tmp_path, compiles):
    launch = _launch()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dc.launch_outcome(launch, "sm80", tmp_path)
        assert dc.launch_outcome(launch, "sm80", tmp_path).cached
    assert compiles == ["sm80"]
    assert not list(tmp_path.rglob("*.tmp*"))


def test_representative_survives_an_unwritable_or_damaged_group_record(tmp_path, compiles):
    launch = lc.Launch("m.k", __file__, (("a", "*fp16"), ("n", "i32")), (), ())
    f = tmp_path / "file"
    f.write_text("")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert dc.representative(launch, f / "cache") == launch
