"""Command line:
``python -m harness golden regen [--failed] [--changes PATH [--overwrite-changes]] [--] [pytest args...]``,
``python -m harness golden unused [--rootdir DIR] RECORD...``, ``python -m harness golden repack [DIR]``,
``python -m harness report merge [--overwrite] OUT IN...``,
``python -m harness compile MODULE_OR_FILE::KERNEL --sig ... [--const ...]`` and
``python -m harness fuzz [--gpu | --compare DIR] [--seed S] [--count N]`` and
``python -m harness mutate [PATH::KERNEL ...] -- [pytest args]`` (``-h`` at every level).

One argparse tree: each feature package declares its subcommand in its ``cli`` module
(``harness.golden.cli``, ``harness.compile.cli``, ``harness.fuzz.cli``, ``harness.mutate.cli``:
``PARSER_KWARGS``, ``add_arguments``, ``run``; the report's
in ``harness.report``, beside its writer) and this module mounts them. Parsing is argparse's at every
level, so an unknown command or option is a usage error (exit 2) naming it, with one exception by design:
every argument ``golden regen`` does not know is pytest's, passed through in order (see
``harness.golden.cli``), and so is everything after ``mutate``'s ``--``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from harness import report as report_cli
from harness.compile import cli as compile_cli
from harness.fuzz import cli as fuzz_cli
from harness.golden import cli as golden_cli
from harness.mutate import cli as mutate_cli

PROG = "python -m harness"


def parser() -> argparse.ArgumentParser:
    """The whole command line, one argparse tree (also what ``-h`` prints at each level)."""
    top = argparse.ArgumentParser(prog=PROG, allow_abbrev=False,
                                  description="lowp-harness commands (the pytest plugin itself needs none).")
    commands = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    golden = commands.add_parser("golden", **golden_cli.PARSER_KWARGS)
    golden_cli.add_arguments(golden)
    golden.set_defaults(run=golden_cli.run)
    compile_ = commands.add_parser("compile", **compile_cli.PARSER_KWARGS)
    compile_cli.add_arguments(compile_)
    compile_.set_defaults(run=compile_cli.run)
    report = commands.add_parser("report", **report_cli.PARSER_KWARGS)
    report_cli.add_arguments(report)
    report.set_defaults(run=report_cli.run)
    fuzz = commands.add_parser("fuzz", **fuzz_cli.PARSER_KWARGS)
    fuzz_cli.add_arguments(fuzz)
    fuzz.set_defaults(run=fuzz_cli.run)
    mutate = commands.add_parser("mutate", **mutate_cli.PARSER_KWARGS)
    mutate_cli.add_arguments(mutate)
    mutate.set_defaults(run=mutate_cli.run)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Parse and run; the exit status (argparse's 2 for a usage error, 0 after ``-h``) is returned, not
    raised, so in-process callers get it like the commands' own."""
    try:
        args = parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
