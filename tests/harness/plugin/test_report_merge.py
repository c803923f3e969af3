"""``harness.report``: merging shards' ``--harness-report`` files on hand-built reports. The shards'
end-to-end path is ``test_shards.py``; these pin each merge rule and refusal, which a mutation survey found it
left open (the launch cells' sums, findings kept once, keys present in some reports only)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

import pytest

from harness import report
from harness.__main__ import main
from harness.summary import Collector, Observation

pytestmark = pytest.mark.lane_independent


def _obs(test: str, op: str = "cast", ulp: int = 0, passed: bool = True) -> dict:
    """One observation as a report holds it."""
    return asdict(Observation(op=op, dtype="bf16", arch="sm90", n=8, worst_ulp=ulp, worst_abs=0.5 * ulp, tol="t",
                              max_ulp=1, passed=passed, test=test))


def _launches(**kw) -> dict:
    base = {"targets": ["sm80", "sm90"], "widen": True, "widen_targets": ["sm90"], "ptxas_budget": 60.0,
            "seconds": 1.25, "compiles": 3, "cached": 1, "cells": [], "findings": []}
    return {**base, **kw}


def _report(*obs: dict, **keys) -> dict:
    c = Collector()
    c.merge(obs)
    return {**c.report(), **keys}


def test_launch_counts_add_up_per_kernel_and_target_and_findings_are_kept_once():
    a = _launches(cells=[{"kernel": "k", "target": "sm90", "ok": 2, "expected": 1},
                         {"kernel": "k", "target": "sm80", "ok": 1}],
                  findings=[{"kernel": "k", "what": "x"}])
    b = _launches(seconds=0.3334, compiles=4, cached=0,
                  cells=[{"kernel": "k", "target": "sm90", "ok": 3, "failed": 1}, {"kernel": "j", "target": "sm90",
                                                                                    "ok": 1}],
                  findings=[{"kernel": "k", "what": "x"}, {"kernel": "j", "what": "y"}])
    got = report._merge_launches([a, b])
    assert got == {"targets": ["sm80", "sm90"], "widen": True, "widen_targets": ["sm90"], "ptxas_budget": 60.0,
                   "seconds": 1.583,
                   "compiles": 7, "cached": 1,
                   "cells": [{"kernel": "j", "target": "sm90", "ok": 1},
                             {"kernel": "k", "target": "sm80", "ok": 1},
                             {"kernel": "k", "target": "sm90", "ok": 5, "expected": 1, "failed": 1}],
                   "findings": [{"kernel": "k", "what": "x"}, {"kernel": "j", "what": "y"}]}
    # a shard that compiled nothing adds nothing (absent counts are zeros)
    assert report._merge_launches([a, {k: a[k] for k in report._LAUNCH_SETTINGS}])["compiles"] == 3


@pytest.mark.parametrize("key", ["targets", "widen", "widen_targets", "ptxas_budget"])
def test_launch_settings_must_agree(key):
    with pytest.raises(ValueError, match=f"compile_launches: the reports ran with different {key} "):
        report._merge_launches([_launches(), _launches(), _launches(**{key: "other"})])


def test_compiles_not_judged_are_put_together_once():
    slow = {"kernel": "k", "target": "sm75", "kind": "budget"}
    other = {"kernel": "j", "target": "sm75", "kind": "budget"}
    got = report._merge_launches([_launches(not_judged=[slow]), _launches(not_judged=[slow, other]), _launches()])
    assert got["not_judged"] == [slow, other]
    assert "not_judged" not in report._merge_launches([_launches(), _launches()])


def test_a_launch_key_without_a_rule_is_refused():
    with pytest.raises(ValueError, match=r"compile_launches: no merge rule for extra, more"):
        report._merge_launches([_launches(), _launches(extra=1, more=2)])


def test_replay_checks_of_every_shard_are_kept_and_counted_again():
    def check(test: str, kind: str, passed: bool) -> dict:
        return {"test": test, "check": kind, "fn": "f", "passed": passed, "lane": "cuda"}

    a = {"counts": {"deterministic": {"passed": 1, "failed": 0}}, "checks": [check("t::b", "deterministic", True)]}
    b = {"counts": {"graph_replay": {"passed": 0, "failed": 1}, "deterministic": {"passed": 1, "failed": 0}},
         "checks": [check("t::a", "graph_replay", False), check("t::a", "deterministic", True)]}
    merged = report.merge([_report(replay=a), _report(replay=b), _report()])["replay"]
    assert merged["counts"] == {"graph_replay": {"passed": 0, "failed": 1}, "deterministic": {"passed": 2, "failed": 0}}
    assert [(c["test"], c["check"]) for c in merged["checks"]] == [("t::a", "deterministic"), ("t::a", "graph_replay"),
                                                                   ("t::b", "deterministic")]


def test_rows_are_recomputed_from_every_shards_observations():
    a = _report(_obs("t::b", ulp=1), _obs("t::a", op="dot"))
    b = _report(_obs("t::c", ulp=2, passed=False))
    merged = report.merge([a, b])
    assert [o["test"] for o in merged["observations"]] == ["t::a", "t::b", "t::c"]
    assert merged == _report(_obs("t::a", op="dot"), _obs("t::b", ulp=1), _obs("t::c", ulp=2, passed=False))
    cast = next(r for r in merged["rows"] if r["op"] == "cast")
    assert (cast["checks"], cast["failures"], cast["worst_ulp"]) == (2, 1, 2)


def test_other_keys_must_be_in_every_report_and_equal():
    a, b = _report(_obs("t::a")), _report(_obs("t::b"))
    assert report.merge([{**a, "arch": "sm90"}, {**b, "arch": "sm90"}])["arch"] == "sm90"
    with pytest.raises(ValueError, match="report key 'arch' differs between the reports and has no merge rule"):
        report.merge([{**a, "arch": "sm90"}, {**b, "arch": "sm80"}])
    with pytest.raises(ValueError, match="report key 'arch' differs"):
        report.merge([{**a, "arch": "sm90"}, b])  # present in one only
    # compile_launches has a rule: merged even where only one shard launched anything
    assert report.merge([{**a, "compile_launches": _launches()}, b])["compile_launches"]["compiles"] == 3


def test_what_cannot_be_merged_is_refused():
    with pytest.raises(ValueError, match="no reports to merge"):
        report.merge([])
    with pytest.raises(ValueError, match=r"report 2: version 0, this harness merges 1"):
        report.merge([_report(), {**_report(), "version": 0}])


def test_the_command_writes_the_merge_and_says_what_it_holds(tmp_path, capsys):
    paths = []
    for i, obs in enumerate((_obs("t::a"), _obs("t::b", op="dot"))):
        paths.append(tmp_path / f"r{i}.json")
        report.write(paths[-1], _report(obs, tols={"b", "a"}))
    assert json.loads(paths[0].read_text())["tols"] == ["a", "b"]  # sets are written sorted
    assert not list(tmp_path.glob("*.tmp*"))
    out = tmp_path / "merged.json"
    assert report.run(argparse.Namespace(out=str(out), inputs=[str(p) for p in paths])) == 0
    assert capsys.readouterr().out == f"report merge: 2 report(s), 2 rows, 2 checks -> {out}\n"
    assert [r["op"] for r in json.loads(out.read_text())["rows"]] == ["cast", "dot"]
    (tmp_path / "bad.json").write_text("{")
    assert report.run(argparse.Namespace(out=str(out), inputs=[str(tmp_path / "bad.json")], overwrite=True)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"report merge: {tmp_path / 'bad.json'}: cannot read a harness report ("), err


def test_write_refuses_what_json_cannot_hold(tmp_path):
    with pytest.raises(TypeError, match="not JSON serializable: object"):
        report.write(tmp_path / "r.json", {"x": object()})


def test_merge_refuses_what_is_no_report_and_an_out_it_cannot_write(tmp_path, capsys):
    """A JSON list crashed the merge with AttributeError; an OUT under a missing directory crashed the write and left
    a temp file."""
    good = tmp_path / "r.json"
    report.write(good, _report(_obs("t::a")))
    lst = tmp_path / "list.json"
    lst.write_text("[1, 2]")
    out = tmp_path / "merged.json"
    assert report.run(argparse.Namespace(out=str(out), inputs=[str(good), str(lst)])) == 2
    assert capsys.readouterr().err == f"report merge: {lst}: a JSON list, not a harness report (a JSON object)\n"
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({**_report(), "observations": [1]}))
    assert report.run(argparse.Namespace(out=str(out), inputs=[str(odd)])) == 2
    assert "'observations' must be a list of objects" in capsys.readouterr().err
    for bad, why in ((tmp_path / "no" / "m.json", "is not a directory"), (tmp_path, "is a directory")):
        assert report.run(argparse.Namespace(out=str(bad), inputs=[str(good)])) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"report merge: {bad}: cannot write the merged report there: ") and why in err, err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["list.json", "odd.json", "r.json"]


def test_a_failed_write_leaves_no_temp_file(tmp_path):
    with pytest.raises(TypeError):
        report.write(tmp_path / "r.json", {"x": object()})
    assert list(tmp_path.iterdir()) == []


def _merge_cli(out, *inputs, overwrite=False) -> int:
    return report.run(argparse.Namespace(out=str(out), inputs=[str(p) for p in inputs], overwrite=overwrite))


def test_an_out_that_is_an_input_a_link_or_exists_is_refused_before_anything_is_read(tmp_path, capsys):
    """``report merge shard1.json shard2.json`` (OUT forgotten) replaced shard1.json by the merge, exit 0; a linked
    OUT was written over; an existing OUT was replaced unasked (golden regen's --changes asks --overwrite-changes)."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    report.write(a, _report(_obs("t::a")))
    report.write(b, _report(_obs("t::b")))
    before = a.read_bytes()
    for out in (a, tmp_path / "." / "b.json"):
        assert _merge_cli(out, a, b, overwrite=True) == 2
        assert "is also an input" in capsys.readouterr().err
    assert _merge_cli(a, b) == 2
    assert "the file exists; remove it or pass --overwrite to replace it" in capsys.readouterr().err
    (tmp_path / "target.json").write_text("keep")
    (tmp_path / "link.json").symlink_to(tmp_path / "target.json")
    assert _merge_cli(tmp_path / "link.json", a, b, overwrite=True) == 2
    assert "is a symbolic link" in capsys.readouterr().err
    assert a.read_bytes() == before and (tmp_path / "target.json").read_text() == "keep"
    out = tmp_path / "m.json"
    out.write_text("old")
    assert _merge_cli(out, a, b, overwrite=True) == 0 and json.loads(out.read_text())["version"] == 1
    assert main(["report", "merge", "--overwrite", str(out), str(a), str(b)]) == 0


def test_an_input_that_is_no_regular_file_is_refused_without_reading_it(tmp_path, capsys):
    """A FIFO input blocked the merge forever."""
    import os

    good = tmp_path / "r.json"
    report.write(good, _report(_obs("t::a")))
    os.mkfifo(tmp_path / "ff")
    for bad, why in (("ff", "is a FIFO, not a regular file"), ("nope.json", "not found")):
        assert _merge_cli(tmp_path / "m.json", good, tmp_path / bad) == 2
        assert capsys.readouterr().err == f"report merge: {tmp_path / bad}: cannot read a harness report ({why})\n"
    (tmp_path / "latin.json").write_bytes(b'{"x": "\xff"}')
    assert _merge_cli(tmp_path / "m.json", good, tmp_path / "latin.json") == 2
    assert f"{tmp_path / 'latin.json'}: cannot read a harness report (" in capsys.readouterr().err
    # the same shard twice (by another name too) would count its observations twice
    (tmp_path / "alias.json").symlink_to(good)
    for again in (good, tmp_path / "alias.json"):
        assert _merge_cli(tmp_path / "m.json", good, again) == 2
        assert capsys.readouterr().err == (f"report merge: {again}: given twice (also as {good}); each shard's "
                                           f"report once\n")
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize(("change", "message"), [
    ({"observations": [{**_obs("t::x"), "n": "many"}]},
     "observation 1 (t::x): field 'n' must be an integer, got 'many'"),
    ({"observations": [{**_obs("t::x"), "passed": 1}]}, "field 'passed' must be true or false, got 1"),
    ({"observations": [{**_obs("t::x"), "typo": 1}]}, "observation 1 (t::x): unknown field 'typo'"),
    ({"observations": [{k: v for k, v in _obs("t::x").items() if k != "op"}]}, "no field 'op'"),
    ({"sanitize": 5}, "'sanitize' must be a JSON object, got 5"),
    ({"sanitize": {"mode": "warn", "counts": 3}}, "sanitize.counts must be an object of integers, got 3"),
    ({"compile_launches": _launches(compiles="3")}, "compile_launches.compiles must be an integer, got '3'"),
    ({"vacuity": {"mode": "on", "findings": [1]}}, "vacuity.findings must be a list of objects, got [1]"),
    ({"coverage": {"cells": [{"kernel": "k"}]}}, "report key 'coverage' is malformed in a report (KeyError"),
])
def test_a_malformed_shard_is_refused_naming_its_file_and_field(tmp_path, capsys, change, message):
    """``"n": "many"`` was a raw TypeError of summary.py, ``"sanitize": 5`` an AttributeError; the errors that were
    said named "report 2", not the file."""
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    report.write(good, _report(_obs("t::a")))
    bad.write_text(json.dumps({**_report(_obs("t::b")), **change}))
    assert _merge_cli(tmp_path / "m.json", good, bad) == 2
    err = capsys.readouterr().err
    assert err.startswith("report merge: ") and message in err, err
    if "malformed in a report" not in message:
        assert err.startswith(f"report merge: {bad}: "), err
    assert not (tmp_path / "m.json").exists()
