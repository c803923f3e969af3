"""``python -m harness golden regen [--failed] [--changes PATH [--overwrite-changes]] [--] [pytest args...]``,
``python -m harness golden unused [--rootdir DIR] RECORD...`` and ``python -m harness golden repack [DIR]``.

Why a subprocess: a regen run is an ordinary pytest run with ``--golden-regen-all`` (``--failed``:
``--golden-regen``, only failing checks), so its normal progress output streams through and every pytest
option works; afterwards the per-file summary is printed from the JSON the plugin writes
(``--golden-changes``). The exit status is pytest's. In CI (``CI`` set) pytest itself refuses to write
goldens, with a usage error. ``--changes PATH`` copies that JSON to PATH once pytest has written it: a PATH that
exists is refused before pytest runs (exit 2) unless ``--overwrite-changes`` says to replace it, so nothing the
command did not create is deleted or overwritten, whatever pytest does.

Every argument ``regen`` does not know is pytest's (a test selection, ``-k``, ``-n``...), passed through in
order; an unknown one is reported by pytest. A ``--`` right after regen's own options is dropped
(``regen -- --failed`` gives pytest ``--failed``). ``harness.__main__`` mounts this under its one argparse
tree (:data:`PARSER_KWARGS`, :func:`add_arguments`, :func:`run`), as it does ``harness.compile.cli``.

``unused`` is the merge step of a sharded run: each shard ran with ``--golden-record=PATH``; this judges
the union of their records (:func:`harness.golden.unused.judge`) and exits 0 when every golden file was
used, 1 listing the unused ones, 2 when the records are not the whole suite (a shard missing, narrowed with
``-k``, interrupted, or from another suite), never passing silently.

``repack`` rewrites every golden under DIR in the current file layout (deflated members since 2026-12-04)
through :func:`harness.golden.files.repack`, which replaces a file only after decoding the new bytes back to
the same arrays and metadata; a file it cannot verify is left alone and named, and the status is then 1.
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
from pathlib import Path
from typing import Any

from harness.golden.paths import output_problem
from harness.golden.unused import judge, load_record

__all__ = ["PARSER_KWARGS", "add_arguments", "regen_goldens", "repack_goldens", "run", "unused_goldens"]

REGEN_DESCRIPTION = """\
Re-capture golden files by running pytest with --golden-regen-all over the given selection (default: the
configured testpaths), then summarize what changed per file. Arguments other than the options below are
pytest's, forwarded in order (a test selection, -k EXPR, -n N, ...); '--' ends regen's own options.
"""

#: How ``python -m harness`` declares the subcommand (``add_parser("golden", **PARSER_KWARGS)``).
UNUSED_DESCRIPTION = """\
Judge unused golden files over the union of shards: each shard of the suite ran with
--golden-record=PATH (pytest --splits N --group i --golden-record=golden-i.json); give every shard's
record. Exit status: 0 every golden file was used, 1 unused files (listed), 2 the records are not the
whole suite (a shard missing, narrowed by -k/-m/paths, interrupted, or another suite's).
"""

REPACK_DESCRIPTION = """\
Rewrite every golden file (*.npz) under DIR in the current layout (deflated members), changing no array
and no metadata: each file is decoded, re-encoded, and replaced only when the new bytes decode to the same
arrays and metadata. Files already in the layout are left untouched. Exit status: 0 all repacked or
unchanged, 1 some file could not be verified (named, left as it was), 2 DIR is not a directory.
"""

PARSER_KWARGS: dict[str, Any] = dict(help="golden files: regen, unused, repack", allow_abbrev=False,
                                     description="Golden files (see docs/goldens.md).")


class _PytestArgs(argparse.ArgumentParser):
    """A ``golden`` subcommand parser; with ``pytest_args=True`` (``regen``) what it does not know is pytest's,
    kept in order as ``pytest_args``; without (``unused``) it is as strict as argparse.

    ``parse_known_args`` is where a subcommand parser hands back the arguments it did not consume; taking
    them here (instead of a REMAINDER positional, which stops working when pytest's part starts with an
    option such as ``-k``) keeps every level above strict."""

    def __init__(self, *args: Any, pytest_args: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pass_through = pytest_args

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:
        if not self.pass_through:
            return super().parse_known_args(args, namespace)
        ns, rest = super().parse_known_args(args, namespace)
        ns.pytest_args = rest[1:] if rest[:1] == ["--"] else rest
        return ns, []


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``golden`` parser's subcommands (``regen``, ``unused``)."""
    commands = p.add_subparsers(dest="golden_command", metavar="COMMAND", required=True, parser_class=_PytestArgs)
    regen = commands.add_parser(
        "regen", help="re-capture goldens with pytest and print what changed", allow_abbrev=False, pytest_args=True,
        usage=f"{p.prog} regen [-h] [--failed] [--changes PATH [--overwrite-changes]] [--] [pytest args...]",
        description=REGEN_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    regen.add_argument("--failed", action="store_true",
                       help="only rewrite goldens whose check fails (pytest --golden-regen); those tests fail")
    regen.add_argument("--changes", metavar="PATH", help="keep the machine-readable change list (JSON) at PATH, "
                       "a new file unless --overwrite-changes")
    regen.add_argument("--overwrite-changes", action="store_true",
                       help="replace the file at --changes PATH if it exists (only once pytest has written the list)")
    unused = commands.add_parser(
        "unused", help="judge unused goldens over the union of shards' --golden-record files",
        allow_abbrev=False, description=UNUSED_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    unused.add_argument("records", nargs="+", metavar="RECORD", help="a shard's --golden-record file")
    unused.add_argument("--rootdir", metavar="DIR", default=".",
                        help="the checkout whose golden dir is judged (default: the current directory)")
    repack_p = commands.add_parser(
        "repack", help="rewrite goldens in the current (compressed) layout, arrays and metadata unchanged",
        allow_abbrev=False, description=REPACK_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    repack_p.add_argument("dir", nargs="?", default="golden", metavar="DIR",
                          help="the golden dir (default: ./golden)")


def run(args: argparse.Namespace) -> int:
    """The subcommand, on arguments parsed by ``python -m harness`` (harness.__main__)."""
    if args.golden_command == "unused":
        return unused_goldens(args.records, rootdir=args.rootdir)
    if args.golden_command == "repack":
        return repack_goldens(args.dir)
    if args.overwrite_changes and args.changes is None:
        print("golden regen: --overwrite-changes needs --changes PATH", file=sys.stderr)
        return 2
    return regen_goldens(args.pytest_args, failed_only=args.failed, changes=args.changes,
                         overwrite_changes=args.overwrite_changes)


def unused_goldens(records: Sequence[str], *, rootdir: str = ".") -> int:
    """``golden unused``: judge the union of the shards' records; prints the verdict, returns its status."""
    # checked here, or no golden file would be found and every one would have "been used"
    what = ("an empty path" if not rootdir else "" if os.path.isdir(rootdir)
            else "not a directory" if os.path.lexists(rootdir) else "not found")
    if what:
        print(f"golden unused: --rootdir {rootdir!r}: {what}; expected the checkout the shards ran on",
              file=sys.stderr)
        return 2
    try:
        loaded = [(path, load_record(path)) for path in records]
    except ValueError as e:
        print(f"golden unused: {e}", file=sys.stderr)
        return 2
    verdict = judge(loaded, rootdir)
    print(verdict.message(), flush=True)
    return verdict.exit_code


def repack_goldens(directory: str | os.PathLike[str]) -> int:
    """``golden repack``: every ``*.npz`` under ``directory``, one line per file that changed or failed, then
    the totals; returns the exit status."""
    from harness.golden.files import GoldenError, repack  # torch: only for this command

    if not os.fspath(directory):  # Path("") is ".": everything under the current directory
        print("golden repack: DIR is an empty path (expected the golden dir)", file=sys.stderr)
        return 2
    root = Path(directory)
    if not root.is_dir() or root.is_symlink():
        print(f"golden repack: {root} is not a directory (expected the golden dir)", file=sys.stderr)
        return 2
    done: dict[str, int] = {"repacked": 0, "unchanged": 0}
    before = after = 0
    refused: list[str] = []
    for path in sorted(root.rglob("*.npz")):
        rel = path.relative_to(root).as_posix()
        try:
            r = repack(path, root=root)
        except GoldenError as e:
            refused.append(rel)
            print(f"  refused    {rel}: {e}", flush=True)
            continue
        done[r.action] += 1
        before, after = before + r.old_size, after + r.new_size
        if r.action == "repacked":
            print(f"  repacked   {rel}  {r.old_size:,} -> {r.new_size:,} bytes", flush=True)
    print(f"golden repack: {sum(done.values()) + len(refused)} files, {done['repacked']} repacked, "
          f"{done['unchanged']} unchanged, {len(refused)} refused; {before:,} -> {after:,} bytes", flush=True)
    return 1 if refused else 0


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


def _changes_problem(changes: str, overwrite: bool) -> str:
    """Why ``--changes`` cannot be written (empty when it can), asked before pytest runs: the checks of the plugin's
    ``--golden-changes`` (:func:`harness.golden.paths.output_problem`)."""
    problem = output_problem(changes, replace_flag=None if overwrite else "--overwrite-changes")
    return f"--changes {changes}: {problem}" if problem else ""


def _keep_changes(src: str, changes: str) -> None:
    """Copy the change list to ``changes``: a temp file beside it, then ``os.replace``."""
    target = Path(changes)
    fd, tmp = tempfile.mkstemp(dir=target.parent if str(target.parent) else ".", prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "wb") as out, open(src, "rb") as f:
            out.write(f.read())
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


def regen_goldens(pytest_args: Sequence[str], *, failed_only: bool = False, changes: str | None = None,
                  overwrite_changes: bool = False) -> int:
    """``golden regen``: pytest over ``pytest_args`` with the regen flag, then the per-file summary;
    ``changes`` keeps the JSON change list there (refused, status 2, if it exists and ``overwrite_changes`` is
    off). Returns pytest's exit status."""
    if changes is not None:  # "" too: an empty path is refused, never taken for no --changes
        problem = _changes_problem(changes, overwrite_changes)
        if problem:
            print(f"golden regen: {problem}", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory(prefix="golden-regen-") as td:
        path = os.path.join(td, "changes.json")
        flag = "--golden-regen" if failed_only else "--golden-regen-all"
        cmd = [sys.executable, "-m", "pytest", "-p", "harness.golden.plugin", flag, f"--golden-changes={path}",
               *pytest_args]
        print(f"running: {shlex.join(cmd)}", flush=True)
        rc = subprocess.call(cmd)
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            print(f"golden regen: pytest exited with status {rc} before recording changes", file=sys.stderr)
            return rc or 1
        if changes is not None:
            _keep_changes(path, changes)
    print("\n".join(_summary(data)), flush=True)
    return rc
