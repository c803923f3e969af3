"""Command line: ``python -m harness golden regen [--failed] [--changes PATH] [--] [pytest args...]`` and
``python -m harness compile MODULE_OR_FILE::KERNEL --sig ... [--const ...]`` (see ``COMPILE_USAGE``).

Runs pytest in a subprocess with ``--golden-regen-all`` (``--failed``: ``--golden-regen``, only failing
checks), so its normal progress output streams through, then prints what changed per golden file, read
from the JSON the plugin writes (``--golden-changes``). The exit status is pytest's. In CI (``CI`` set)
pytest itself refuses to write goldens, with a usage error.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

USAGE = """\
usage: python -m harness golden regen [--failed] [--changes PATH] [--] [pytest args...]
       python -m harness compile MODULE_OR_FILE::KERNEL --sig NAME=TYPE,... [--const NAME=VALUE ...]
                                 [--targets sm80,sm90] [--no-widen] [--num-warps N] [--num-stages N]

  Re-capture golden files by running pytest with --golden-regen-all over the given selection
  (default: the configured testpaths), then summarize what changed.

  --failed        only rewrite goldens whose check fails (pytest --golden-regen); those tests fail
  --changes PATH  keep the machine-readable change list (JSON) at PATH
"""


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


def regen(args: Sequence[str]) -> int:
    rest = list(args)
    failed_only = False
    keep: str | None = None
    while rest:
        a = rest[0]
        if a == "--failed":
            failed_only = True
            rest.pop(0)
        elif a == "--changes" and len(rest) > 1:
            keep = rest[1]
            del rest[:2]
        elif a.startswith("--changes="):
            keep = a.split("=", 1)[1]
            rest.pop(0)
        elif a in ("-h", "--help"):
            print(USAGE, end="")
            return 0
        elif a == "--":
            rest.pop(0)
            break
        else:
            break
    with tempfile.TemporaryDirectory(prefix="golden-regen-") as td:
        changes = os.path.abspath(keep) if keep else os.path.join(td, "changes.json")
        if os.path.exists(changes):
            os.unlink(changes)
        flag = "--golden-regen" if failed_only else "--golden-regen-all"
        cmd = [sys.executable, "-m", "pytest", "-p", "harness._golden_hooks", flag,
               f"--golden-changes={changes}", *rest]
        print(f"running: {shlex.join(cmd)}", flush=True)
        rc = subprocess.call(cmd)
        try:
            with open(changes, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            print(f"golden regen: pytest exited with status {rc} before recording changes", file=sys.stderr)
            return rc or 1
    print("\n".join(_summary(data)), flush=True)
    return rc


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:2] == ["golden", "regen"]:
        return regen(args[2:])
    if args[:1] == ["compile"]:
        from harness._compile_cli import main as compile_main

        return compile_main(args[1:])
    if args[:1] in (["-h"], ["--help"]):
        print(USAGE, end="")
        return 0
    print(USAGE, end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
