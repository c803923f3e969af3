"""``python -m harness golden regen [--failed] [--changes PATH] [--] [pytest args...]``.

Why a subprocess: a regen run is an ordinary pytest run with ``--golden-regen-all`` (``--failed``:
``--golden-regen``, only failing checks), so its normal progress output streams through and every pytest
option works; afterwards the per-file summary is printed from the JSON the plugin writes
(``--golden-changes``). The exit status is pytest's. In CI (``CI`` set) pytest itself refuses to write
goldens, with a usage error.

Every argument ``regen`` does not know is pytest's (a test selection, ``-k``, ``-n``...), passed through in
order; an unknown one is reported by pytest. A ``--`` right after regen's own options is dropped
(``regen -- --failed`` gives pytest ``--failed``). ``harness.__main__`` mounts this under its one argparse
tree (:data:`PARSER_KWARGS`, :func:`add_arguments`, :func:`run`), as it does ``harness.compile.cli``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

__all__ = ["PARSER_KWARGS", "add_arguments", "regen_goldens", "run"]

REGEN_DESCRIPTION = """\
Re-capture golden files by running pytest with --golden-regen-all over the given selection (default: the
configured testpaths), then summarize what changed per file. Arguments other than the options below are
pytest's, forwarded in order (a test selection, -k EXPR, -n N, ...); '--' ends regen's own options.
"""

#: How ``python -m harness`` declares the subcommand (``add_parser("golden", **PARSER_KWARGS)``).
PARSER_KWARGS: dict[str, Any] = dict(help="golden files: regen", allow_abbrev=False,
                                     description="Golden files (see README: Goldens).")


class _PytestArgs(argparse.ArgumentParser):
    """The ``regen`` parser: what it does not know is pytest's, kept in order as ``pytest_args``.

    ``parse_known_args`` is where a subcommand parser hands back the arguments it did not consume; taking
    them here (instead of a REMAINDER positional, which stops working when pytest's part starts with an
    option such as ``-k``) keeps every level above strict."""

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:
        ns, rest = super().parse_known_args(args, namespace)
        ns.pytest_args = rest[1:] if rest[:1] == ["--"] else rest
        return ns, []


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``golden`` parser's subcommands (``regen``)."""
    commands = p.add_subparsers(dest="golden_command", metavar="COMMAND", required=True, parser_class=_PytestArgs)
    regen = commands.add_parser(
        "regen", help="re-capture goldens with pytest and print what changed", allow_abbrev=False,
        usage=f"{p.prog} regen [-h] [--failed] [--changes PATH] [--] [pytest args...]",
        description=REGEN_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    regen.add_argument("--failed", action="store_true",
                       help="only rewrite goldens whose check fails (pytest --golden-regen); those tests fail")
    regen.add_argument("--changes", metavar="PATH", help="keep the machine-readable change list (JSON) at PATH")


def run(args: argparse.Namespace) -> int:
    """The subcommand, on arguments parsed by ``python -m harness`` (harness.__main__)."""
    return regen_goldens(args.pytest_args, failed_only=args.failed, changes=args.changes)


def _summary(data: dict[str, Any]) -> list[str]:
    changes = data.get("changes", [])
    created = [c for c in changes if c.get("action") == "created"]
    lines = [f"golden regen: {data.get('checked', 0)} checks, {len(created)} created, "
             f"{len(changes) - len(created)} rewritten, "
             f"{max(0, int(data.get('checked', 0)) - len(changes))} unchanged"]
    if changes:
        wa = max(len(c["action"]) for c in changes)
        wp = max(len(c["path"]) for c in changes)
        for c in changes:
            if c.get("layout"):
                detail = c["layout"]
            elif c["action"] == "created" or c.get("reason", "").startswith("unreadable"):
                detail = f"{c['elements']} elements ({c.get('reason') or 'new'})"
            else:
                detail = f"{c['changed']} / {c['elements']} elements changed"
                if c.get("worst_ulp") is not None:
                    detail += f", worst {c['worst_ulp']} ulp"
                if c.get("worst_abs") is not None:
                    detail += f", worst abs {c['worst_abs']:.3g}"
            lines.append(f"  {c['action']:<{wa}}  {c['path']:<{wp}}  {detail}")
    return lines


def regen_goldens(pytest_args: Sequence[str], *, failed_only: bool = False, changes: str | None = None) -> int:
    """``golden regen``: pytest over ``pytest_args`` with the regen flag, then the per-file summary;
    ``changes`` keeps the JSON change list there. Returns pytest's exit status."""
    with tempfile.TemporaryDirectory(prefix="golden-regen-") as td:
        path = os.path.abspath(changes) if changes else os.path.join(td, "changes.json")
        if os.path.exists(path):
            os.unlink(path)
        flag = "--golden-regen" if failed_only else "--golden-regen-all"
        cmd = [sys.executable, "-m", "pytest", "-p", "harness.golden", flag, f"--golden-changes={path}",
               *pytest_args]
        print(f"running: {shlex.join(cmd)}", flush=True)
        rc = subprocess.call(cmd)
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            print(f"golden regen: pytest exited with status {rc} before recording changes", file=sys.stderr)
            return rc or 1
    print("\n".join(_summary(data)), flush=True)
    return rc
