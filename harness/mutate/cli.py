"""``python -m harness mutate [PATH::KERNEL ...] [options] -- [pytest args]``: kernel mutation testing.

The pytest args run once unmutated, recording which test launched which kernel (launch capture, so on the
interpreter: TRITON_INTERPRET=1); every mutant of each named @triton.jit function then runs, in a child pytest of
its own, only the tests that launched it. Without a target, every kernel the tests launched is mutated. Exit status: 0
every mutant killed or declared equivalent, 1 a survivor or a mutant that could not be run (or the tests fail
unmutated), 2 a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.argtypes import at_least_one
from harness.mutate.mutations import KINDS, MutateError, Target

__all__ = ["PARSER_KWARGS", "add_arguments", "run"]

PROG = "python -m harness mutate"

#: How ``python -m harness`` declares the subcommand.
PARSER_KWARGS: dict[str, Any] = dict(
    help="kernel mutation testing: can the tests that launch a kernel fail when it is wrong?",
    description=__doc__.split("\n\n", 1)[1],
    usage=f"{PROG} [-h] [--jobs N] [--kinds K,...] [--timeout S] [--json PATH] [--list] [PATH::KERNEL ...] "
          f"-- [pytest args]",
    epilog="example: TRITON_INTERPRET=1 python -m harness mutate kernels/turboquant/store.py::_store_k8v4_kernel "
           "-- --harness-lane=interp tests/kernels/turboquant",
    allow_abbrev=False,
)


def _seconds(text: str) -> float:
    try:
        s = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not s > 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {text}")
    return s


def _kinds(text: str) -> tuple[str, ...]:
    got = tuple(k.strip() for k in text.split(",") if k.strip())
    bad = [k for k in got if k not in KINDS]
    if not got or bad:
        raise argparse.ArgumentTypeError(f"expected kinds among {', '.join(KINDS)}, got {bad[0] if bad else text!r}")
    return got


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jobs", type=at_least_one("process", "processes"), default=1, metavar="N",
                   help="mutants run at once, one child pytest each (default 1)")
    p.add_argument("--kinds", type=_kinds, default=None, metavar="K,...",
                   help=f"only these mutation kinds ({', '.join(KINDS)})")
    p.add_argument("--timeout", type=_seconds, default=None, metavar="S",
                   help="seconds one mutant may run before it counts as killed by timeout (default: 5x the "
                        "unmutated record run, at least 600)")
    p.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the report here (JSON)")
    p.add_argument("--list", action="store_true", help="list the mutants with their diffs; run nothing")


def add_arguments(p: argparse.ArgumentParser) -> None:
    _options(p)
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)


def _split(args: argparse.Namespace) -> str | None:
    """Targets and options before ``--``, pytest's arguments after; the message of a usage error, if any."""
    rest = list(args.rest)
    cut = rest.index("--") if "--" in rest else len(rest)
    before, args.pytest_args = rest[:cut], rest[cut + 1:]
    p = argparse.ArgumentParser(prog=PROG, add_help=False, allow_abbrev=False, exit_on_error=False)
    _options(p)
    p.add_argument("targets", nargs="*")
    try:
        ns, unknown = p.parse_known_args(before, namespace=args)
    except argparse.ArgumentError as e:
        return str(e)
    if unknown:
        return f"unrecognized arguments: {' '.join(unknown)} (pytest's arguments go after --)"
    raw, args.targets = ns.targets, []
    for t in raw:
        path, sep, name = t.partition("::")
        if not sep or not path or not name.isidentifier():
            return f"target {t!r}: expected PATH::KERNEL (a file and a @triton.jit function's name)"
        if not Path(path).is_file():
            return f"target {t!r}: no file {path!r}"
        args.targets.append(Target(path, name))
    if args.json is not None:
        if args.list:
            return "--json: --list runs nothing and writes no report; give one of them"
        from harness.paths import own_file_problem

        problem = own_file_problem(args.json)  # asked before the run: a report that cannot be written is lost after it
        if problem:
            return f"--json {args.json}: {problem}"
    return None


def _mutants_of(targets: list[Target], kinds: tuple[str, ...] | None) -> list[Any]:
    from harness.mutate.mutations import mutants

    out = []
    for t in targets:
        try:
            text = Path(t.path).read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise MutateError(f"{t.path}::{t.name}: the file is not UTF-8 Python source ({e.reason} at byte "
                              f"{e.start})") from None
        out += mutants(text, t.path, t.name, lambda k: kinds is None or k in kinds)
    return out


def run(args: argparse.Namespace) -> int:
    err = _split(args)
    if err is None and not args.targets and args.list:
        err = "--list needs PATH::KERNEL targets"
    if err is None:
        try:
            listed = _mutants_of(args.targets, args.kinds)
        except (MutateError, OSError) as e:
            err = str(e)
    if err is not None:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    if args.list:
        for m in listed:
            print(f"{m.id} in {m.kernel}" + (f" (declared equivalent: {m.declared})" if m.declared else ""))
            print(m.diff)
        print(f"{len(listed)} mutants")
        return 0
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    from harness.mutate import runner

    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="harness-mutate-") as tmp:
        work = Path(tmp)
        print(f"recording which tests launch which kernel: pytest {' '.join(args.pytest_args)}", file=sys.stderr)
        rec = runner.record(args.pytest_args, work)
        code, launched, rec_s, tail = rec.code, rec.launched, rec.seconds, rec.tail
        if code != 0:
            print(f"{PROG}: the tests do not pass unmutated (pytest exit {code}); mutants need a passing suite:\n"
                  f"{tail}", file=sys.stderr)
            return 1
        if not launched:
            print(f"{PROG}: error: no test launched a kernel: launch capture sees interpreted launches only "
                  f"(TRITON_INTERPRET=1), of the tests the pytest args select", file=sys.stderr)
            return 2
        targets = args.targets
        if not targets:
            seen = {(f, k.rsplit(".", 1)[-1]) for ks in launched.values() for k, f in ks}
            targets = [Target(f, k) for f, k in sorted(seen)]
            try:
                targets = [Target(_relative(t.path), t.name) for t in targets]
            except ValueError:
                pass
        try:
            ms = _mutants_of(targets, args.kinds)
        except (MutateError, OSError) as e:
            print(f"{PROG}: error: {e}", file=sys.stderr)
            return 2
        by_target = {(t.path, t.name): runner.tests_for(t, launched) for t in targets}
        # Generous: a mutant is a new source, so launch capture compiles its launches cold for every target where the
        # record run read them from the compile cache (a surviving turboquant store mask mutant: 334 s against a
        # 28 s record run); a survivor cut off by a short timeout would count as killed.
        timeout = args.timeout or max(600.0, 5 * rec_s)
        print(f"{len(ms)} mutants of {len(targets)} kernels; unmutated run {rec_s:.0f} s; timeout {timeout:.0f} s "
              f"a mutant; {args.jobs} at a time", file=sys.stderr)

        def progress(o: Any) -> None:
            print(f"  {o.status:8} {o.mutant.id} ({o.tests} tests, {o.seconds:.0f} s)", file=sys.stderr, flush=True)

        outcomes = runner.run_all([(m, by_target[(m.file, m.kernel)]) for m in ms], args.pytest_args,
                                  jobs=args.jobs, timeout=timeout, workdir=work, progress=progress,
                                  test_seconds=rec.test_seconds)
    report = runner.Report(outcomes, rec_s, time.monotonic() - t0, list(args.pytest_args))
    print("\n".join(report.lines()))
    if args.json is not None:
        try:
            _write_json(args.json, report.to_json())
        except OSError as e:
            print(f"{PROG}: error: --json {args.json}: cannot write the report: {e.strerror or e}", file=sys.stderr)
            return 2
    return report.exit_code()


def _write_json(path: Path, data: Any) -> None:
    """``data`` to ``path`` through a temp file beside it and ``os.replace``: a link put there during the run is
    replaced, not written through, and a failed write leaves neither half a report nor the temp file."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(json.dumps(data, indent=1) + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _relative(path: str) -> str:
    return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
