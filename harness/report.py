"""The ``--harness-report`` JSON: written once per session (:func:`write`, by :mod:`harness.plugin`), merged
across the shards of a split suite (:func:`merge`, ``python -m harness report merge OUT IN...``).

Why a merge: a suite split into shards (pytest-split's ``--splits N --group i``, one CI job each) writes one
report per shard, and the question "how close to its tolerance is each op × dtype × arch" is about the whole
suite. Merging does what the xdist hand-off does within one run: the observations of every shard are put
together and the rows are computed from them by the one code that computes them for a single run
(:class:`harness.summary.Collector`), so the merged rows are the rows of one run of the whole suite. The
observations come sorted by test (a single run's order is its workers' order anyway).

Other keys are each feature's section (``harness.session.Section.report``). ``compile_launches``: its settings
(targets, widening) must agree; cell counts, compiles, cached and seconds add up, findings are put together.
``replay``: the graph-replay, determinism and batch-invariance checks of every shard, counted again.
The key holds counts, not which compile each one was, so a compile two shards both ran or read back from a
shared cache counts in each (a single run counts it once). ``sanitize``: one mode; launches and finding counts
add up, findings are put together. A key with no merge rule must be equal in every
report, else the merge fails naming it: a report that cannot be merged faithfully is not written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from harness.paths import check_path, input_problem, own_file_problem
from harness.replay.results import summarize
from harness.summary import Collector, observation_problem

__all__ = ["PARSER_KWARGS", "add_arguments", "check_path", "merge", "merge_files", "run", "write"]

#: The observation part's format (``harness.summary.Collector.report``).
VERSION = 1

#: Keys of a ``compile_launches`` report that are settings: equal in every shard, kept once.
_LAUNCH_SETTINGS = ("targets", "widen", "widen_targets", "ptxas_budget")


def _json_default(o: Any) -> Any:
    if isinstance(o, set):
        return sorted(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def write(path: str | os.PathLike[str], data: Mapping[str, Any]) -> None:
    """Write a report atomically (a reader never sees half a file; a failed write leaves no temp file)."""
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True, default=_json_default)
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def _merge_launches(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``compile_launches`` key over shards: settings equal (the ptxas budget among them), cell counts,
    compiles, cached and seconds added, findings and compiles not judged put together (each once). The key holds
    counts, not which compile each was, so a compile that two shards both ran (or read back) counts once per
    shard."""
    first = parts[0]
    for p in parts[1:]:
        for k in _LAUNCH_SETTINGS:
            if p.get(k) != first.get(k):
                raise ValueError(f"compile_launches: the reports ran with different {k} ({first.get(k)!r} and "
                                 f"{p.get(k)!r}): run every shard with the same options")
    known = {*_LAUNCH_SETTINGS, "seconds", "cells", "findings", "compiles", "cached", "captured_launches",
             "not_judged"}
    for p in parts:
        extra = sorted(set(p) - known)
        if extra:
            raise ValueError(f"compile_launches: no merge rule for {', '.join(extra)}")
    cells: dict[tuple[str, str], dict[str, int]] = {}
    findings: list[Any] = []
    not_judged: list[Any] = []  # compiles whose ptxas ran past its budget: put together as findings are
    captured: dict[str, int] = {}  # per test; a test runs in one shard, so a repeat can only be the same count
    for p in parts:
        for test, n in p.get("captured_launches", {}).items():
            captured[test] = max(captured.get(test, 0), int(n))
        for c in p.get("cells", ()):
            cell = cells.setdefault((c["kernel"], c["target"]), {})
            for k, v in c.items():
                if k not in ("kernel", "target"):
                    cell[k] = cell.get(k, 0) + int(v)
        findings.extend(f for f in p.get("findings", ()) if f not in findings)
        not_judged.extend(f for f in p.get("not_judged", ()) if f not in not_judged)
    return {**{k: first.get(k) for k in _LAUNCH_SETTINGS},
            "seconds": round(sum(float(p.get("seconds", 0.0)) for p in parts), 3),
            "compiles": sum(int(p.get("compiles", 0)) for p in parts),
            "cached": sum(int(p.get("cached", 0)) for p in parts),
            "cells": [{"kernel": k, "target": t, **v} for (k, t), v in sorted(cells.items())],
            "findings": findings,
            **({"not_judged": not_judged} if any("not_judged" in p for p in parts) else {}),
            **({"captured_launches": dict(sorted(captured.items()))}
               if any("captured_launches" in p for p in parts) else {})}


def _merge_vacuity(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``vacuity`` key over shards: one mode, counts and seconds added, findings put together."""
    modes = {p.get("mode") for p in parts}
    if len(modes) != 1:
        raise ValueError(f"vacuity: the reports ran with different modes ({', '.join(sorted(map(str, modes)))})")
    findings = sorted((f for p in parts for f in p.get("findings", ())),
                      key=lambda f: (str(f.get("test")), str(f.get("where"))))
    slowest = sorted(((k, v) for p in parts for k, v in p.get("slowest", {}).items()), key=lambda kv: -kv[1])[:5]
    return {"mode": parts[0].get("mode"), **{k: sum(int(p.get(k, 0)) for p in parts)
                                             for k in ("assertions", "candidates", "vacuous", "justified")},
            "seconds": round(sum(float(p.get("seconds", 0.0)) for p in parts), 3), "slowest": dict(slowest),
            "errors": [e for p in parts for e in p.get("errors", ())], "findings": findings}


def _merge_coverage(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``coverage`` key over shards: cells added; a kernel is unlaunched when no shard launched it."""
    cells: dict[tuple[str, str, str], dict[str, int]] = {}
    for p in parts:
        for c in p.get("cells", ()):
            cell = cells.setdefault((c["kernel"], c["types"], c["arch"]), {"launches": 0, "tests": 0})
            cell["launches"] += int(c["launches"])
            cell["tests"] += int(c["tests"])
    out: dict[str, Any] = {"cells": [{"kernel": k, "types": t, "arch": a, **v}
                                     for (k, t, a), v in sorted(cells.items())]}
    if any("packages" in p for p in parts):
        launched = {k for k, _, _ in cells}
        out["packages"] = sorted({x for p in parts for x in p.get("packages", ())})
        out["unlaunched"] = sorted({u for p in parts for u in p.get("unlaunched", ())
                                    if u.split(" ")[0] not in launched})
        out["justified"] = {k: v for p in parts for k, v in p.get("justified", {}).items()
                            if k.split(" ")[0] not in launched}
    return out


def _merge_replay(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``replay`` key over shards: every shard's checks, counted again (``harness.replay.results``)."""
    return summarize([c for p in parts for c in p.get("checks", ())])


def _merge_sanitize(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``sanitize`` key over shards: one mode, launches and counts added, findings put together."""
    modes = {p.get("mode") for p in parts}
    if len(modes) != 1:
        raise ValueError(f"sanitize: the reports ran with different modes ({', '.join(sorted(map(str, modes)))})")
    counts: dict[str, int] = {}
    for p in parts:
        for k, v in p.get("counts", {}).items():
            counts[k] = counts.get(k, 0) + int(v)
    out: dict[str, Any] = {"mode": parts[0].get("mode"), "launches": sum(int(p.get("launches", 0)) for p in parts),
                           "counts": counts, "findings": [f for p in parts for f in p.get("findings", ())]}
    skipped = {k: v for p in parts for k, v in p.get("skipped", {}).items()}
    if skipped:
        out["skipped"] = skipped
    unsupported = next((p["unsupported"] for p in parts if p.get("unsupported")), None)
    if unsupported:
        out["unsupported"] = unsupported
    return out


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


#: How each field a merge rule computes with must look in a shard's section, as (what it must be, test): checked
#: per file before merging, so a malformed shard is said naming its file and field, not as a TypeError of the sums.
_INT = ("an integer", _is_int)
_NUM = ("a number", _is_num)
_LIST = ("a list", lambda v: isinstance(v, list))
_OBJ = ("an object", lambda v: isinstance(v, Mapping))
_OBJS = ("a list of objects", lambda v: isinstance(v, list) and all(isinstance(x, Mapping) for x in v))
_INTS = ("an object of integers", lambda v: isinstance(v, Mapping) and all(map(_is_int, v.values())))
_NUMS = ("an object of numbers", lambda v: isinstance(v, Mapping) and all(map(_is_num, v.values())))
_STRS = ("a list of strings", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v))
_SHAPES: dict[str, dict[str, tuple[str, Any]]] = {
    "compile_launches": {"seconds": _NUM, "compiles": _INT, "cached": _INT, "cells": _OBJS, "findings": _LIST,
                         "not_judged": _LIST, "captured_launches": _INTS},
    "vacuity": {"assertions": _INT, "candidates": _INT, "vacuous": _INT, "justified": _INT, "seconds": _NUM,
                "slowest": _NUMS, "errors": _LIST, "findings": _OBJS},
    "coverage": {"cells": _OBJS, "packages": _STRS, "unlaunched": _STRS, "justified": _OBJ},
    "replay": {"checks": _OBJS},
    "sanitize": {"launches": _INT, "counts": _INTS, "findings": _LIST, "skipped": _OBJ},
}


def _section_problem(key: str, part: Any) -> str:
    """Why ``part``, a shard's ``key`` section, cannot be merged by its rule (empty when it can)."""
    if not isinstance(part, Mapping):
        return f"{key!r} must be a JSON object, got {part!r}"
    for field, (what, ok) in _SHAPES.get(key, {}).items():
        if field in part and not ok(part[field]):
            return f"{key}.{field} must be {what}, got {part[field]!r}"
    return ""


_RULES = {"compile_launches": _merge_launches, "vacuity": _merge_vacuity, "coverage": _merge_coverage,
          "replay": _merge_replay, "sanitize": _merge_sanitize}
_OBSERVATION_KEYS = ("version", "rows", "observations")


def merge(reports: Sequence[Mapping[str, Any]], names: Sequence[str] | None = None) -> dict[str, Any]:
    """One report of the union of ``reports`` (each a ``--harness-report`` JSON); ``ValueError`` when they
    cannot be merged faithfully (another format version, different settings, a differing key with no rule) or one
    is malformed, naming it by ``names`` (its file; default ``report N``) and the field."""
    if not reports:
        raise ValueError("no reports to merge")
    names = list(names) if names is not None else [f"report {i + 1}" for i in range(len(reports))]
    for name, r in zip(names, reports, strict=True):
        if not isinstance(r, Mapping):
            raise ValueError(f"{name}: a JSON {type(r).__name__}, not a harness report (a JSON object)")
        if r.get("version") != VERSION:
            raise ValueError(f"{name}: version {r.get('version')!r}, this harness merges {VERSION}")
        obs = r.get("observations", [])
        if not isinstance(obs, list) or not all(isinstance(o, Mapping) for o in obs):
            raise ValueError(f"{name}: 'observations' must be a list of objects")
        for j, o in enumerate(obs):
            problem = observation_problem(o)
            if problem:
                raise ValueError(f"{name}: observation {j + 1} ({o.get('test', '?')}): {problem}")
        for k in sorted(set(r) & set(_RULES)):
            problem = _section_problem(k, r[k])
            if problem:
                raise ValueError(f"{name}: {problem}")
    col = Collector()
    observations = [o for r in reports for o in r.get("observations", ())]
    try:
        col.merge(sorted(observations, key=lambda o: str(o.get("test", ""))))
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"an observation of the reports is malformed ({type(e).__name__}: {e})") from None
    out = col.report()
    keys = sorted({k for r in reports for k in r} - set(_OBSERVATION_KEYS))
    for k in keys:
        parts = [r[k] for r in reports if k in r]
        rule = _RULES.get(k)
        if rule is not None:
            try:
                out[k] = rule(parts)
            except (KeyError, TypeError, AttributeError) as e:  # deeper than _SHAPES looks (a cell's field)
                raise ValueError(f"report key {k!r} is malformed in a report ({type(e).__name__}: {e})") from None
        elif len(parts) == len(reports) and all(p == parts[0] for p in parts):
            out[k] = parts[0]
        else:
            raise ValueError(f"report key {k!r} differs between the reports and has no merge rule")
    return out


def _out_problem(out: str, inputs: Sequence[str | os.PathLike[str]], overwrite: bool) -> str:
    """Why the merge must not be written at ``out`` (empty when it may). An ``out`` that is one of the inputs is
    refused even with ``overwrite``: it is ``report merge shard1.json shard2.json`` with OUT forgotten, which
    would replace a shard by the merge."""
    problem = own_file_problem(out)
    if problem:
        return problem
    for path in inputs:
        if os.path.realpath(out) == os.path.realpath(path) or (
                os.path.exists(out) and os.path.exists(path) and os.path.samefile(out, path)):
            return f"is also an input ({os.fspath(path)}); OUT comes first: report merge OUT IN..."
    if os.path.exists(out) and not overwrite:
        return "the file exists; remove it or pass --overwrite to replace it"
    return ""


def merge_files(out: str | os.PathLike[str], inputs: Sequence[str | os.PathLike[str]], *,
                overwrite: bool = False) -> dict[str, Any]:
    """Read ``inputs``, merge them, write ``out``; returns the merged report. ``ValueError`` naming the file for
    an input that is no report and for an ``out`` that cannot be written, is an input, or exists (unless
    ``overwrite``): checked before anything is read."""
    problem = _out_problem(os.fspath(out), inputs, overwrite)
    if problem:
        raise ValueError(f"{os.fspath(out)}: cannot write the merged report there: {problem}")
    seen: dict[str, str] = {}
    for path in inputs:  # before reading any: a FIFO would block the read forever
        problem = input_problem(path)
        if problem:
            raise ValueError(f"{os.fspath(path)}: cannot read a harness report ({problem})")
        real = os.path.realpath(path)
        if real in seen:  # its observations would count twice
            raise ValueError(f"{os.fspath(path)}: given twice (also as {seen[real]}); each shard's report once")
        seen[real] = os.fspath(path)
    reports = []
    for path in inputs:
        try:
            with open(path, encoding="utf-8") as f:
                reports.append(json.load(f))
        except (OSError, ValueError) as e:  # ValueError: JSON's, and a file that is not UTF-8
            raise ValueError(f"{os.fspath(path)}: cannot read a harness report ({e})") from None
    merged = merge(reports, [os.fspath(p) for p in inputs])
    try:
        write(out, merged)
    except OSError as e:
        raise ValueError(f"{os.fspath(out)}: cannot write the merged report there: {e.strerror or e}") from None
    return merged


# ------------------------------------------------------------------------------------------ command line

#: How ``python -m harness`` declares the subcommand (``add_parser("report", **PARSER_KWARGS)``).
PARSER_KWARGS: dict[str, Any] = dict(help="--harness-report files: merge", allow_abbrev=False,
                                     description="--harness-report JSON files (see docs/shards.md).")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``report`` parser's subcommands (``merge``)."""
    commands = p.add_subparsers(dest="report_command", metavar="COMMAND", required=True)
    m = commands.add_parser("merge", help="merge the reports of several shards into one", allow_abbrev=False,
                            description="Merge --harness-report JSON files of the shards of one suite into OUT: "
                                        "the rows are those of one run of the whole suite.")
    m.add_argument("out", metavar="OUT", help="the merged report to write: a new file unless --overwrite")
    m.add_argument("inputs", nargs="+", metavar="IN", help="a shard's --harness-report file")
    m.add_argument("--overwrite", action="store_true", help="replace OUT if it exists (never an IN)")


def run(args: argparse.Namespace) -> int:
    """The subcommand, on arguments parsed by ``python -m harness`` (harness.__main__)."""
    try:
        merged = merge_files(args.out, args.inputs, overwrite=getattr(args, "overwrite", False))
    except ValueError as e:
        print(f"report merge: {e}", file=sys.stderr)
        return 2
    checks = sum(r["checks"] for r in merged["rows"])
    print(f"report merge: {len(args.inputs)} report(s), {len(merged['rows'])} rows, {checks} checks -> {args.out}")
    return 0
