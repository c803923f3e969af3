"""Run every ``benchmarks/bench_*.py`` on this machine's GPU, one after another, each in its own process.

Usage: ``python benchmarks/run.py [--json-dir DIR] [--only NAME ...] [-- ARGS]``: each script's table is
printed as it runs; with ``--json-dir`` each also writes ``DIR/<script stem>.json``; ARGS after ``--`` go to
every script (e.g. ``--only bench_turboquant -- --sweep``). Exit status 1 if any script failed
(the others still run). Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--json-dir", type=Path, default=None, help="write <DIR>/<bench stem>.json per script")
    p.add_argument("--only", nargs="*", default=None, help="script stems to run (default: all bench_*.py)")
    argv = sys.argv[1:] if argv is None else argv
    passed = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    scripts = sorted(HERE.glob("bench_*.py"))
    if args.only:
        scripts = [s for s in scripts if s.stem in args.only]
    failed = []
    for script in scripts:
        cmd = [sys.executable, str(script), *passed]
        if args.json_dir is not None:
            cmd += ["--json", str(args.json_dir / f"{script.stem}.json")]
        print(f"=== {script.name} ===", flush=True)
        if subprocess.run(cmd, cwd=HERE.parent).returncode != 0:
            failed.append(script.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
