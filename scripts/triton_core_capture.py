"""Run a fixed sample of Triton's own interpreter unit tests with and without launch capture (issue 40, item 2).

    python scripts/triton_core_capture.py TEST_CORE_PY OUTDIR [--python PY] [--only a|b] [--chunk 20] [--cold]
                                          [--category casts ...]
    python scripts/triton_core_capture.py TEST_CORE_PY OUTDIR --list     # the sample only, nothing run

``TEST_CORE_PY`` is ``python/test/unit/language/test_core.py`` of a Triton checkout matching the Triton that
``--python`` imports (its ``python/conftest.py`` or ``python/test/conftest.py`` supplies the ``device`` fixture).
Triton's tests are valid kernels by definition, so whatever capture makes fail that passed without it is a false
alarm of the harness (docs/capture.md, "Triton's own tests under capture").

The sample (:func:`sample`) is drawn from the ids that ``pytest --collect-only -m interpreter --device cpu``
lists, grouped by test function into :data:`CATEGORIES`: within a category each function's ids are shuffled with
``random.Random(SEED)`` and taken round-robin over the functions (sorted by name) until the category's quota is
met, so every function of a category is represented and nothing is picked by outcome. A category none of whose
functions is marked for the interpreter draws from its unmarked ids (Triton 3.6 does not mark
``test_scaled_dot``; a test that then fails without capture counts for nothing). The ids depend on the checkout,
so the same seed gives a different (but again fixed) sample for another Triton version.

Each mode runs the sample in chunks of ``--chunk`` ids (one pytest process each, ``TRITON_INTERPRET=1``,
``-p no:cacheprovider -p no:xdist``, in the checkout's ``python/`` directory, so no ini of this repo applies):

- ``a``: the harness plugin loaded, capture off;
- ``b``: ``--harness-compile-launches`` and nothing else (the plugin's defaults, what an adopter gets).

``--cold`` gives mode ``b`` an empty compile cache (``$HARNESS_COMPILE_CACHE`` in ``OUTDIR``). ``OUTDIR`` gets
``sample.txt``, one junit XML per chunk and mode, and ``report.json`` / ``report.md``: per test the outcome in
each mode, the wall and CPU time of each mode, and every test that passes in ``a`` and fails in ``b`` with its
message. The exit status is 1 when there is such a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED = 40

#: category -> (quota, test functions of test_core.py); a function absent from a checkout is skipped
CATEGORIES: dict[str, tuple[int, tuple[str, ...]]] = {
    "casts": (30, ("test_cast", "test_convert_float16_to_float32", "test_abs_fp8")),
    "binary ops": (30, ("test_bin_op", "test_bin_op_constexpr", "test_compare_op", "test_bitwise_op",
                        "test_shift_op", "test_floordiv", "test_addptr", "test_umulhi",
                        "test_int1_bin_op_wraparound")),
    "math": (30, ("test_math_op", "test_unary_op", "test_abs", "test_math_erf_op", "test_math_fma_op",
                  "test_math_divide_op", "test_precise_math", "test_math_member_fn", "test_fdiv_ieee_rounding",
                  "test_clamp", "test_clamp_symmetric", "test_propagate_nan", "test_neg_preserves_signed_zero")),
    "reductions/scans": (30, ("test_reduce1d", "test_reduce", "test_scan2d", "test_generic_reduction",
                              "test_cumsum_dtype", "test_optimize_thread_locality", "test_max_returns_zero",
                              "test_argmax_argmin_with_nan", "test_max_min_with_nan")),
    "dot": (25, ("test_dot", "test_dot3d", "test_dot_without_load", "test_dot_max_num_imprecise_acc",
                 "test_dot_multidim")),
    "dot_scaled": (15, ("test_scaled_dot",)),
}

MODES = {"a": [], "b": ["--harness-compile-launches"]}


def _function(test_id: str) -> str:
    return test_id.split("::")[-1].split("[")[0]


def collect(test_core: Path, python: str, marker: str | None = "interpreter") -> list[str]:
    """The ids of ``test_core`` (those marked ``marker``) as pytest lists them, relative to the checkout's
    ``python/``."""
    cwd = _python_dir(test_core)
    select = ["-m", marker] if marker else []
    out = subprocess.run([python, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "--collect-only",
                          "-q", *select, "--device", "cpu", str(test_core.relative_to(cwd))],
                         cwd=cwd, env=_env(), capture_output=True, text=True)
    ids = [line for line in out.stdout.splitlines() if "::" in line]
    if not ids:
        raise SystemExit(f"collecting {test_core} listed no tests:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return ids


def sample(ids: list[str], seed: int = SEED, unmarked: list[str] = ()) -> dict[str, list[str]]:
    """The fixed sample of ``ids`` per category (see the module docstring); a category none of whose functions
    has an id in ``ids`` draws from ``unmarked`` instead."""
    by_function: dict[str, list[str]] = defaultdict(list)
    for test_id in ids:
        by_function[_function(test_id)].append(test_id)
    spare: dict[str, list[str]] = defaultdict(list)
    for test_id in unmarked:
        spare[_function(test_id)].append(test_id)
    for _, functions in CATEGORIES.values():
        if not any(f in by_function for f in functions):
            by_function.update({f: spare[f] for f in functions if f in spare})
    rng = random.Random(seed)
    chosen: dict[str, list[str]] = {}
    for category, (quota, functions) in CATEGORIES.items():
        pools = []
        for name in sorted(f for f in functions if f in by_function):
            pool = sorted(by_function[name])
            rng.shuffle(pool)
            pools.append(pool)
        picked: list[str] = []
        while len(picked) < quota and any(pools):
            for pool in pools:
                if pool and len(picked) < quota:
                    picked.append(pool.pop())
        chosen[category] = picked
    return chosen


def _python_dir(test_core: Path) -> Path:
    for parent in test_core.resolve().parents:
        if parent.name == "python" and (parent / "test").is_dir():
            return parent
    raise SystemExit(f"{test_core} is not under a Triton checkout's python/test/")


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ, TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(extra or {})
    return env


def _run_chunk(python: str, cwd: Path, ids: list[str], mode: str, xml: Path, env: dict[str, str],
               more: list[str]) -> dict:
    report = [f"--harness-report={xml.with_suffix('.json')}"] if mode == "b" else []
    cmd = [python, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", "--device", "cpu",
           f"--junitxml={xml}", "-o", "junit_family=xunit1", *MODES[mode], *more, *report, *ids]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    (xml.with_suffix(".log")).write_text(proc.stdout[-200_000:] + proc.stderr[-50_000:])
    return {"wall": wall, "cpu": cpu, "rc": proc.returncode}


def _captured(xml: Path) -> dict[str, int]:
    """name -> distinct launches capture recorded for that test (mode ``b``'s ``--harness-report``)."""
    path = xml.with_suffix(".json")
    if not path.exists():
        return {}
    data = json.loads(path.read_text()).get("compile_launches", {}).get("captured_launches", {})
    return {nodeid.split("::")[-1]: n for nodeid, n in data.items()}


def _outcomes(xml: Path) -> dict[str, tuple[str, str]]:
    """name -> (passed/failed/error/skipped, message) from one junit XML."""
    out: dict[str, tuple[str, str]] = {}
    if not xml.exists():
        return out
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = case.get("name", "")
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
                message = (node.get("message") or "") + "\n" + (node.text or "")
                break
        if outcome == "error" and name in out:
            outcome = out[name][0] if out[name][0] == "failed" else "error"
        out[name] = (outcome, message.strip())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("test_core", type=Path, help="python/test/unit/language/test_core.py of a Triton checkout")
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--python", default=sys.executable, help="the interpreter whose Triton runs the tests")
    parser.add_argument("--only", choices=sorted(MODES), help="run one mode (default: both)")
    parser.add_argument("--chunk", type=int, default=20, help="ids per pytest process (default 20)")
    parser.add_argument("--cold", action="store_true", help="mode b starts from an empty compile cache in OUTDIR")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--category", action="append", choices=sorted(CATEGORIES),
                        help="run only this category of the sample (repeatable; default: all)")
    parser.add_argument("--capture-arg", action="append", default=[], metavar="ARG",
                        help="one more pytest argument for mode b (e.g. --capture-arg=--harness-targets=sm80,sm90); "
                             "without it mode b is the plugin's defaults")
    parser.add_argument("--list", action="store_true", help="print the sample and stop")
    args = parser.parse_args(argv)
    if args.chunk < 1:
        parser.error(f"--chunk must be a positive number of test ids, got {args.chunk}")
    if not args.test_core.is_file():
        parser.error(f"test_core: no file at {args.test_core}")
    test_core = args.test_core.resolve()
    cwd = _python_dir(test_core)
    chosen = sample(collect(test_core, args.python), args.seed, collect(test_core, args.python, marker=None))
    ids = [i for c, group in chosen.items() for i in group if not args.category or c in args.category]
    category = {i: c for c, group in chosen.items() for i in group}
    args.outdir.mkdir(parents=True, exist_ok=True)
    (args.outdir / "sample.txt").write_text("".join(f"{c}\t{i}\n" for c, group in chosen.items() for i in group))
    if args.list:
        print("\n".join(f"{category[i]}\t{i}" for i in ids))
        return 0
    extra = {"b": {}}
    if args.cold:
        extra["b"]["HARNESS_COMPILE_CACHE"] = str((args.outdir / "compile-cache").resolve())
    results: dict[str, dict[str, tuple[str, str]]] = {}
    timing: dict[str, dict[str, float]] = {}
    captured: dict[str, int] = {}
    for mode in [args.only] if args.only else sorted(MODES):
        results[mode], timing[mode] = {}, {"wall": 0.0, "cpu": 0.0}
        for n in range(0, len(ids), args.chunk):
            xml = args.outdir / f"{mode}-{n // args.chunk:03d}.xml"
            t = _run_chunk(args.python, cwd, ids[n:n + args.chunk], mode, xml, _env(extra.get(mode)),
                           args.capture_arg if mode == "b" else [])
            timing[mode]["wall"] += t["wall"]
            timing[mode]["cpu"] += t["cpu"]
            results[mode].update(_outcomes(xml))
            captured.update(_captured(xml))
            print(f"{mode} chunk {n // args.chunk}: {t['wall']:.0f} s wall, {t['cpu']:.0f} s CPU, rc {t['rc']}",
                  flush=True)
    return _report(args.outdir, ids, category, results, timing, captured)


def _report(outdir: Path, ids, category, results, timing, captured) -> int:
    rows, added = [], []
    for test_id in ids:
        name = test_id.split("::")[-1]
        row = {"id": test_id, "category": category[test_id]}
        for mode, res in results.items():
            row[mode] = res.get(name, ("missing", ""))[0]
        if "b" in results:
            row["captured_launches"] = captured.get(name, 0)
        rows.append(row)
        if row.get("a") == "passed" and row.get("b") not in (None, "passed", "skipped"):
            added.append({**row, "message": results["b"][name][1] if name in results["b"] else ""})
    counts: dict[str, dict[str, dict[str, int]]] = {}
    for row in rows:
        for mode in results:
            cell = counts.setdefault(row["category"], {}).setdefault(mode, defaultdict(int))
            cell[row[mode]] += 1
    added_by_category: dict[str, int] = defaultdict(int)
    for row in added:
        added_by_category[row["category"]] += 1
    report = {"tests": rows, "timing": timing, "added_failures": added,
              "counts": {c: {m: dict(v) for m, v in ms.items()} for c, ms in counts.items()},
              "added_by_category": dict(added_by_category)}
    (outdir / "report.json").write_text(json.dumps(report, indent=1))
    lines = [f"{len(ids)} tests; " + "; ".join(f"mode {m}: {t['wall']:.0f} s wall, {t['cpu']:.0f} s CPU"
                                               for m, t in timing.items()), ""]
    for cat, ms in counts.items():
        lines.append(f"{cat}: " + "; ".join(f"{m}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
                                            for m, c in ms.items())
                     + f"; added failures {added_by_category.get(cat, 0)}")
    if "b" in results:
        ran = [r for r in rows if r["b"] in ("passed", "failed")]
        lines += ["", f"tests run with capture whose launches it recorded and compiled: "
                      f"{sum(1 for r in ran if r['captured_launches'])} of {len(ran)} (the rest launch none that "
                      f"capture could type, or only launches the interpreter refused; see 'not captured' in the "
                      f"logs)"]
    lines += ["", f"passed without capture, failed with it: {len(added)}"]
    for row in added:
        lines += [f"- {row['id']} ({row['category']})", "  " + row["message"][:3000].replace("\n", "\n  ")]
    (outdir / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[: len(counts) + 4]))
    return 1 if added else 0


if __name__ == "__main__":
    sys.exit(main())
