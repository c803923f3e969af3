"""``harness.golden.unused.judge`` on hand-built records: every reason it refuses to judge, the overlap note, and
the message's pinned lines. The end-to-end path (shards writing real records) is ``plugin/test_shards.py``;
these pin what a mutation survey found it left open: the status names, the truncated lists, the overlap count."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.golden.unused import RECORD_KIND, RECORD_VERSION, Verdict, judge, load_record, unused_files

SUITE = [f"tests/test_m.py::test_{i}" for i in range(12)]


def record(selected, *, used=(), items=None, passed=None, exitstatus=0, **extra) -> dict:
    r = {"kind": RECORD_KIND, "version": RECORD_VERSION, "exitstatus": exitstatus, "golden_dir": "golden",
         "collected": list(SUITE), "selected": list(selected), "used": list(used), "items": dict(items or {}),
         "passed": list(selected if passed is None else passed), "not_passed": [], "skipped_modules": []}
    r.update(extra)
    return r


def goldens(root: Path, *rels: str) -> None:
    for rel in rels:
        p = root / "golden" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"")


@pytest.mark.parametrize("status, name", [(2, "INTERRUPTED"), (3, "INTERNAL_ERROR"), (4, "USAGE_ERROR"),
                                          (5, "NO_TESTS_COLLECTED"), (None, "None"), (7, "7")])
def test_a_shard_that_did_not_finish_is_named_by_its_exit_status(tmp_path, status, name):
    v = judge([("a.json", record(SUITE[:6])), ("b.json", record(SUITE[6:], exitstatus=status))], tmp_path)
    assert v.exit_code == 2
    assert v.message() == f"golden unused: 2 record(s): not judged: b.json ended with {name}: its tests' " \
                          f"outcomes are not known"


@pytest.mark.parametrize("status", [0, 1])
def test_failed_tests_still_leave_a_shard_judgeable(tmp_path, status):
    goldens(tmp_path, "test_m/test_0.npz")
    v = judge([("a.json", record(SUITE, exitstatus=status, used=["golden/test_m/test_0.npz"]))], tmp_path)
    assert v.problem is None and v.exit_code == 0
    assert v.message().splitlines() == ["golden unused: 1 record(s), 12 tests (0 with goldens), 1 golden file(s) used",
                                        "every golden file was used"]


def test_no_records_is_not_judged(tmp_path):
    v = judge([], tmp_path)
    assert v.exit_code == 2 and v.message() == "golden unused: 0 record(s): not judged: no records given"


def test_missing_tests_are_listed_ten_at_most(tmp_path):
    # 11 missing: ten shown and "... and 1 more"; 10 missing: all ten, no tail
    v = judge([("a.json", record(SUITE[:1]))], tmp_path)
    shown = ", ".join(sorted(SUITE[1:])[:10])
    assert v.problem == f"11 of the suite's 12 tests ran in no shard: {shown} ... and 1 more (is a shard's record " \
                        f"missing?)"
    v = judge([("a.json", record(SUITE[:2]))], tmp_path)
    assert v.problem == f"10 of the suite's 12 tests ran in no shard: {', '.join(sorted(SUITE[2:]))} (is a shard's " \
                        f"record missing?)"


def test_tests_in_more_than_one_shard_are_noted_not_refused(tmp_path):
    goldens(tmp_path, "test_m/test_0.npz", "test_m/test_1.npz")
    a = record(SUITE[:7], used=["golden/test_m/test_0.npz"])
    b = record(SUITE[5:], used=["golden/test_m/test_1.npz"])
    v = judge([("a.json", a), ("b.json", b)], tmp_path)
    assert v.exit_code == 0 and v.overlap == SUITE[5:7]
    assert v.message().splitlines()[1] == f"note: 2 test(s) ran in more than one shard: {SUITE[5]}, {SUITE[6]}"
    v = judge([("a.json", record(SUITE[:6])), ("b.json", record(SUITE[6:]))], tmp_path)
    assert v.overlap == [] and "ran in more than one shard" not in v.message()


def test_counts_and_unused_files_over_the_union(tmp_path):
    goldens(tmp_path, "test_m/test_0.npz", "test_m/test_1.npz", "test_m/test_2.npz", "other/x.npz")
    a = record(SUITE[:6], used=["golden/test_m/test_0.npz"], items={SUITE[0]: "golden/test_m"})
    b = record(SUITE[6:], used=["golden/test_m/test_1.npz", "golden/test_m/test_0.npz"],
               items={SUITE[6]: "golden/test_m"})
    v = judge([("a.json", a), ("b.json", b)], tmp_path)
    assert (v.records, v.tests, v.golden_tests, v.files_used) == (2, 12, 2, 2)
    assert v.unused == ["golden/other/x.npz", "golden/test_m/test_2.npz"] and v.exit_code == 1
    assert v.message().splitlines() == [
        "golden unused: 2 record(s), 12 tests (2 with goldens), 2 golden file(s) used",
        "2 golden file(s) used by no test of any shard:", "  golden/other/x.npz", "  golden/test_m/test_2.npz"]
    # a golden test that failed in the shard that ran it blocks its directory; one passing elsewhere does not
    b["passed"] = SUITE[7:]
    assert judge([("a.json", a), ("b.json", b)], tmp_path).unused == ["golden/other/x.npz"]


def test_files_a_tests_params_share_wait_on_all_of_its_params(tmp_path):
    # golden/<module>/<test>/<param>: "inputs" is no param's own directory; every param loads it. On the GPU lane
    # of 2026-12-05 every param was skipped (lane-independent), and the inputs were called unused.
    fn = "golden/test_m/test_f"
    goldens(tmp_path, "test_m/test_f/a/x.npz", "test_m/test_f/a/y.npz", "test_m/test_f/b/x.npz",
            "test_m/test_f/inputs/in.npz", "test_m/test_g/inputs/in.npz")
    items = {SUITE[0]: f"{fn}/a", SUITE[1]: f"{fn}/b", SUITE[2]: "golden/test_m/test_g/_"}
    used = [f"{fn}/a/x.npz"]

    def unused(passed):
        return unused_files(tmp_path / "golden", tmp_path, used=used, items=items, passed=passed, skipped_modules=())

    # b skipped: its own file and the shared inputs wait; a passed without its y, test_g without its inputs
    assert unused([SUITE[0], SUITE[2]]) == [f"{fn}/a/y.npz", "golden/test_m/test_g/inputs/in.npz"]
    # every param passed and none loaded the inputs: unused too
    every = [f"{fn}/a/y.npz", f"{fn}/b/x.npz", f"{fn}/inputs/in.npz", "golden/test_m/test_g/inputs/in.npz"]
    assert unused(SUITE[:3]) == every
    # a test of another depth (a golden root one level deeper) blocks its own directory only
    items[SUITE[3]] = "golden/test_m"
    assert unused(SUITE[:3]) == every


def test_a_verdict_before_judging_counts_nothing():
    v = Verdict(records=3)
    assert (v.tests, v.golden_tests, v.files_used) == (0, 0, 0)


@pytest.mark.parametrize("field, value, words", [
    ("golden_dir", "goldens", "b.json records golden dir 'goldens', a.json 'golden'"),
    ("partial", "-k given", "b.json is not a shard of the whole suite (-k given)"),
])
def test_records_that_disagree_are_not_judged(tmp_path, field, value, words):
    v = judge([("a.json", record(SUITE[:6])), ("b.json", record(SUITE[6:], **{field: value}))], tmp_path)
    assert v.exit_code == 2 and v.problem == words


def test_a_record_of_another_version_is_refused(tmp_path):
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"kind": RECORD_KIND, "version": RECORD_VERSION + 1}))
    with pytest.raises(ValueError, match=rf"golden record version {RECORD_VERSION + 1}, this harness reads "
                                         rf"{RECORD_VERSION}:"):
        load_record(p)
    p.write_text(json.dumps({"kind": RECORD_KIND, "version": 1}))
    assert RECORD_VERSION == 1 and load_record(p)["version"] == 1  # records written today stay readable


def test_a_test_that_passed_in_one_shard_and_failed_in_another_did_not_pass(tmp_path):
    """A golden test that ran in two shards, passed in one and failed in the other, may not have reached its checks:
    its golden dir is not judged (its file is not reported unused), as for a test that failed in its only shard."""
    goldens(tmp_path, "test_m5/x.npz")
    items = {SUITE[5]: "golden/test_m5"}
    a = record(SUITE[:7], items=items)
    b = record(SUITE[5:], items=items, passed=SUITE[6:], not_passed=[SUITE[5]])
    v = judge([("a.json", a), ("b.json", b)], tmp_path)
    assert v.unused == [] and v.exit_code == 0
    v = judge([("a.json", a), ("b.json", record(SUITE[5:], items=items))], tmp_path)
    assert v.unused == ["golden/test_m5/x.npz"]  # passed in both: judged, and nothing used it


# ------------------------------------------------------------------------------------- bad records, bad rootdir

@pytest.mark.parametrize("field", ["collected", "selected", "items", "used", "passed", "not_passed",
                                   "skipped_modules", "golden_dir", "partial", "exitstatus"])
def test_a_record_field_of_the_wrong_type_is_refused_naming_the_file_and_field(tmp_path, field):
    """A field of 5 raised ``TypeError: 'int' object is not iterable``, and golden_dir = 5 was taken as "5"."""
    p = tmp_path / "r.json"
    bad = record(SUITE)
    bad[field] = [5] if field == "exitstatus" else 5
    p.write_text(json.dumps(bad))
    with pytest.raises(ValueError, match=rf"^{p}: field '{field}' is .*; expected .* \(a record written by pytest "
                                         rf"--golden-record=PATH holds one\)$"):
        load_record(p)


@pytest.mark.parametrize("golden_dir", ["../../..", "/etc", "golden/../..", ""])
def test_a_record_golden_dir_outside_the_rootdir_is_refused(tmp_path, golden_dir):
    """golden_dir "../../.." had the judge walk and list unrelated files outside the checkout."""
    p = tmp_path / "r.json"
    p.write_text(json.dumps(record(SUITE, golden_dir=golden_dir)))
    with pytest.raises(ValueError, match=r"field 'golden_dir' is .*; expected a path relative to the rootdir that "
                                         r"stays inside it"):
        load_record(p)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_record_that_is_no_regular_file_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "ff")
    for bad, why in (("ff", "is a FIFO, not a regular file"), (".", "is a directory, not a regular file"),
                     ("", "an empty path"), ("nope.json", "not found")):
        path = str(tmp_path / bad) if bad else ""
        with pytest.raises(ValueError, match=rf"{why}; expected a golden record"):
            load_record(path)


def test_a_rootdir_that_is_no_directory_is_never_a_pass(tmp_path, capsys):
    """``golden unused --rootdir nope`` (or a file) said "every golden file was used", exit 0."""
    from harness.golden.cli import unused_goldens

    p = tmp_path / "r.json"
    p.write_text(json.dumps(record(SUITE, used=["golden/test_m/test_0.npz"])))
    for rootdir, why in ((str(tmp_path / "nope"), "not found"), (str(p), "not a directory"), ("", "an empty path")):
        assert unused_goldens([str(p)], rootdir=rootdir) == 2
        assert f"--rootdir {rootdir!r}: {why}; expected the checkout the shards ran on" in capsys.readouterr().err
    assert judge([("r.json", load_record(p))], tmp_path / "nope").exit_code == 2
    # a checkout without the golden files the shards used is another checkout: not judged either
    v = judge([("r.json", load_record(p))], tmp_path)
    assert v.exit_code == 2 and "the records used 1 golden file(s) but" in v.problem
    goldens(tmp_path, "test_m/test_0.npz")
    assert judge([("r.json", load_record(p))], tmp_path).exit_code == 0


def test_empty_paths_given_to_the_commands_are_refused(tmp_path, monkeypatch, capsys):
    """``golden repack ""`` repacked everything under the current directory; ``regen --changes ""`` kept nothing."""
    from harness.golden.cli import regen_goldens, repack_goldens

    monkeypatch.chdir(tmp_path)
    assert repack_goldens("") == 2
    assert "golden repack: DIR is an empty path" in capsys.readouterr().err
    assert regen_goldens(["--collect-only"], changes="") == 2
    assert "golden regen: --changes : an empty path" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
