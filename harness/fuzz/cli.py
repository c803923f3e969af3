"""``python -m harness fuzz``: generated kernels (:mod:`harness.fuzz.kernelgen`) through the plugin's interpreter.

- ``python -m harness fuzz [--seed S] [--count N] [--arch A]``: the CPU differential rule
  (:mod:`harness.fuzz.differential`): every kernel Triton's interpreter runs, the plugin runs, with the same bits
  but where a documented model says otherwise. Exit 1 on a false failure or an unexplained difference.
- ``python -m harness fuzz --gpu --count N --out DIR``: the N kernels run on the CUDA device and captured to DIR,
  then compared on the interpreter (a child process, ``TRITON_INTERPRET=1``) with the plugin's shims and with
  Triton's own: the share bit-exact by op class, and the smallest kernel of each class that differs.
- ``python -m harness fuzz --compare DIR``: that comparison, on this box, of a capture made elsewhere.

The comparison never fails the command on a difference (finding them is its purpose): its table is the result.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness.argtypes import at_least_one

__all__ = ["PARSER_KWARGS", "add_arguments", "run"]

#: How ``python -m harness`` declares the subcommand.
PARSER_KWARGS: dict[str, Any] = dict(
    help="generated kernels: the plugin against Triton's interpreter (CPU) or against the GPU",
    description=__doc__.split("\n\n")[0].split(": ", 1)[1],
    epilog="examples: python -m harness fuzz --count 500; python -m harness fuzz --gpu --count 2000 --out fz; "
           "python -m harness fuzz --compare fz --markdown docs-table.md",
    allow_abbrev=False,
)


def _seed(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a seed >= 0, got {n}")
    return n


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=_seed, default=47000, help="first seed (default 47000, CI's)")
    p.add_argument("--count", type=at_least_one("kernel", "kernels"), default=200,
                   help="number of kernels, seeds seed..seed+count-1")
    p.add_argument("--arch", default="sm90", help="the arch the interpreter computes as (default sm90)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--gpu", action="store_true", help="run the kernels on the CUDA device, then compare")
    mode.add_argument("--compare", metavar="DIR", type=Path, help="compare a capture made with --gpu")
    p.add_argument("--out", type=Path, help="--gpu: the capture directory to create (default: a new temporary one)")
    p.add_argument("--markdown", type=Path, help="also write the comparison's table and smallest kernels here")


def run(args: argparse.Namespace) -> int:
    from harness.arch import _KNOWN_CC, parse_arch
    from harness.paths import own_file_problem

    try:
        arch = parse_arch(args.arch)
    except (ValueError, TypeError) as e:
        print(f"python -m harness fuzz: --arch: {e}", file=sys.stderr)
        return 2
    if arch.kind != "cuda":  # the casts imitate a CUDA arch (harness.interp.casts.target_for): others fall back to sm90
        print(f"python -m harness fuzz: --arch: {arch.name} is not modelled; the plugin imitates a CUDA arch's casts: "
              f"{', '.join(f'sm{cc}' for cc in _KNOWN_CC)}", file=sys.stderr)
        return 2
    if args.out is not None and not args.gpu:
        print("python -m harness fuzz: --out goes with --gpu (the capture directory)", file=sys.stderr)
        return 2
    if args.markdown is not None:
        if not (args.gpu or args.compare is not None):
            print("python -m harness fuzz: --markdown goes with --compare or --gpu (the comparison's table)",
                  file=sys.stderr)
            return 2
        problem = own_file_problem(args.markdown)
        if problem:  # asked before the run: the table is written after it
            print(f"python -m harness fuzz: --markdown {args.markdown}: {problem}", file=sys.stderr)
            return 2
    if args.gpu:
        return _gpu(args)
    if args.compare is not None:
        return _compare(args.compare, args.arch, args.markdown)
    return _cpu(args)


def _interpreting(arch: str) -> Any:
    """This process on the interpreter with the plugin's shims for ``arch``: the patch layer holding them."""
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        raise RuntimeError("Triton was imported before TRITON_INTERPRET=1 was set: run as python -m harness fuzz")
    os.environ["TRITON_INTERPRET"] = "1"
    from harness.interp import shims
    from harness.interp.patch import Patch

    patch = Patch()
    shims.install(patch, arch)
    return patch


def _cpu(args: argparse.Namespace) -> int:
    from collections import Counter

    patch = _interpreting(args.arch)
    from harness.fuzz import differential, kernelgen

    outcomes: Counter[tuple[str, str]] = Counter()
    problems = []
    try:
        with differential.quiet():
            for case in kernelgen.cases(args.seed, args.count):
                v = differential.check(case, reproduce=f"python -m harness fuzz --seed {{seed}} --count 1 "
                                                            f"--arch {args.arch}")
                outcomes[(case.op_class, v.outcome)] += 1
                if v.problem:
                    problems.append(v.problem)
    finally:
        patch.undo()
    print(f"{args.count} generated kernels (seeds {args.seed}..{args.seed + args.count - 1}), plugin as {args.arch} "
          f"against Triton's interpreter:")
    for (cls, what), n in sorted(outcomes.items()):
        print(f"  {cls:12} {what:36} {n}")
    for p in problems[:3]:
        print("\n" + p)
    print(f"\n{len(problems)} failures" + (f" (the first {min(3, len(problems))} above)" if problems else ""))
    return 1 if problems else 0


def _compare(directory: Path, arch: str, markdown: Path | None) -> int:
    from harness.fuzz import gpu

    try:
        gpu.load_capture(directory)
    except (OSError, ValueError) as e:
        print(f"python -m harness fuzz: --compare: {e}", file=sys.stderr)
        return 2
    patch = _interpreting(arch)
    try:
        tally = gpu.compare(directory, arch, progress=lambda s: print(s, file=sys.stderr, flush=True))
    finally:
        patch.undo()
    text = tally.table()
    print(text)
    if markdown is not None:
        markdown.write_text(text + "\n\n" + tally.smallest() + "\n")
        print(f"\n(table and the smallest differing kernel per class written to {markdown})")
    return 0


def _gpu(args: argparse.Namespace) -> int:
    from harness.fuzz import gpu

    os.environ.pop("TRITON_INTERPRET", None)
    out = args.out or Path(tempfile.mkdtemp(prefix="harness-fuzz-gpu-"))
    try:
        gpu.capture(range(args.seed, args.seed + args.count), out,
                    progress=lambda s: print(s, file=sys.stderr, flush=True))
    except (ValueError, FileExistsError) as e:
        print(f"python -m harness fuzz: --gpu: {e}", file=sys.stderr)
        return 2
    print(f"captured {args.count} kernels to {out}", file=sys.stderr)
    cmd = [sys.executable, "-m", "harness", "fuzz", "--compare", str(out), "--arch", args.arch]
    if args.markdown is not None:
        cmd += ["--markdown", str(args.markdown)]
    return subprocess.call(cmd, env={**os.environ, "TRITON_INTERPRET": "1"})
