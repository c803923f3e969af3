"""``python -m harness compile MODULE_OR_FILE::KERNEL --sig x_ptr=*fp16,n=i32 --const BLOCK=128``, and
``python -m harness compile --warm MANIFEST [--jobs N] [--background DONE]`` (the GPU lane's warm start,
:mod:`harness.compile.warm`; in the background beside the run, :mod:`harness.compile.background`).

For repos whose kernels have no interpreter tests: compile one kernel signature (and, unless ``--no-widen``, its
fp16/bf16/fp32 variants) for the compile-matrix targets and print the kernel × target matrix with each
failure's compiler line. Exit status: 0 clean, 1 findings, 2 usage error. Results share the launch-capture
disk cache (:func:`harness.compile.disk_cache.cache_dir`); the texts are launch capture's
(:mod:`harness.compile.message`).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.argtypes import at_least, at_least_one
from harness.compile.cache import compile_only_process
from harness.compile.disk_cache import cache_dir
from harness.compile.findings import Report, check
from harness.compile.launches import Launch
from harness.compile.message import (
    LOWERING_LEGEND,
    MATRIX_LEGEND,
    format_capture_totals,
    format_finding,
    group,
    has_lowering,
    render_matrix,
)
from harness.compile.signature import prepare
from harness.compile.targets import DEFAULT_TARGETS, check_targets, parse_targets

EPILOG = """\
type strings: '*' + element type for a tensor ('*fp16', '*bf16', '*fp32', '*u8', '*fp8e4nv', '*fp8e5',
'*fp8e4b15'), a bare type for a scalar ('i32', 'i64', 'fp32', 'i1'). Constexpr values are Python literals
(128, True, 1.5, 'x') or Triton dtypes (tl.float8e4nv, tl.float8e5, tl.float8e4b15, tl.bfloat16).
example: python -m harness compile kernels/turboquant/store.py::_store_k8v4_kernel --sig key_ptr=*bf16,...
"""


#: How ``python -m harness`` declares the subcommand (``add_parser("compile", **PARSER_KWARGS)``).
PARSER_KWARGS: dict[str, Any] = dict(
    help="compile one kernel signature for the compile-matrix targets",
    description="Compile a @triton.jit kernel for GPU targets on this machine and print the kernel x target matrix.",
    epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("kernel", metavar="MODULE_OR_FILE::KERNEL", nargs="?",
                   help="e.g. pkg.mod::my_kernel or path/to/mod.py::k (not with --warm)")
    p.add_argument("--sig", action="append", metavar="NAME=TYPE,...",
                   help="runtime argument types (repeatable or comma-separated); required with a kernel")
    p.add_argument("--const", action="append", default=[], metavar="NAME=VALUE", help="a constexpr value")
    p.add_argument("--targets", default=None, metavar="T1,T2", help="default: sm75,sm80,sm86,sm89,sm90,sm100,sm120")
    p.add_argument("--no-widen", action="store_true", help="compile only the given types, not fp16/bf16/fp32 variants")
    # checked here: a value the compiler asserts on would otherwise be reported as a finding of the kernel
    p.add_argument("--num-warps", type=_power_of_two, default=None, metavar="N", help="a power of 2")
    p.add_argument("--num-stages", type=at_least(0, "stage", "stages"), default=None, metavar="N")
    p.add_argument("--num-ctas", type=at_least_one("CTA", "CTAs"), default=None, metavar="N")
    p.add_argument("--maxnreg", type=at_least_one("register", "registers"), default=None, metavar="N")
    warm = p.add_argument_group("warm start of a GPU run (instead of a kernel)")
    warm.add_argument("--warm", metavar="MANIFEST", default=None,
                      help="compile every kernel specialization a GPU run recorded (--harness-record-launches) "
                           "into Triton's on-disk cache, in parallel processes that never touch the GPU")
    warm.add_argument("--jobs", type=int, default=None, metavar="N",
                      help="with --warm: compiling processes (default or 0: the CPU count)")
    warm.add_argument("--warm-target", default=None, metavar="T",
                      help="with --warm: the target to compile for (default: the manifest's, e.g. sm90)")
    warm.add_argument("--missing-ok", action="store_true",
                      help="with --warm: a missing manifest is not an error (say so, exit 0)")
    warm.add_argument("--background", metavar="DONE", default=None,
                      help="with --warm: return at once and warm in a process of its own, which writes DONE when "
                           "it ends (its log: DONE.log); a GPU-lane pytest with HARNESS_WARM_DONE=DONE waits for it "
                           "before its first test")
    warm.add_argument("--done-file", metavar="DONE", default=None,
                      help="with --warm: write DONE when the warm start ends, whatever happens (what --background "
                           "runs)")


def _power_of_two(text: str) -> int:
    n = at_least_one("warp", "warps")(text)
    if n & (n - 1):
        raise argparse.ArgumentTypeError(f"expected a power of 2 (1, 2, 4, 8, ...), got {n}")
    return n


class UsageError(Exception):
    pass


def _pairs(items: Sequence[str], what: str) -> list[tuple[str, str]]:
    """``NAME=VALUE`` pairs of repeatable, comma-separated options; a name given twice is refused rather than the
    last one silently taken."""
    out: list[tuple[str, str]] = []
    for chunk in items:
        for part in (p.strip() for p in chunk.split(",")):
            if not part:
                continue
            name, sep, value = part.partition("=")
            if not sep or not name.strip() or not value.strip():
                raise UsageError(f"{what}: {part!r} is not NAME=VALUE")
            earlier = next((v for k, v in out if k == name.strip()), None)
            if earlier is not None:
                raise UsageError(f"{what}: {name.strip()} given twice ({earlier!r} and {value.strip()!r})")
            out.append((name.strip(), value.strip()))
    return out


def _const_value(name: str, text: str) -> Any:
    if text.startswith(("tl.", "triton.language.")):
        import triton.language as tl  # here: `python -m harness --help` must not import triton

        attr = text.rsplit(".", 1)[1]
        v = getattr(tl, attr, None)
        if v is None:
            raise UsageError(f"--const {name}={text}: triton.language has no {attr!r}")
        return v
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise UsageError(f"--const {name}={text}: expected a Python literal (128, True, 'x') or tl.<dtype>") from None


def _load_kernel(spec: str) -> Any:
    mod_part, sep, attr = spec.rpartition("::")
    if not sep or not mod_part or not attr:
        raise UsageError(f"kernel {spec!r}: expected MODULE_OR_FILE::KERNEL, e.g. pkg.mod::my_kernel")
    if mod_part.endswith(".py") or "/" in mod_part:
        path = Path(mod_part)
        if not path.is_file():
            raise UsageError(f"kernel {spec!r}: no such file {mod_part}")
        sys.path.insert(0, str(path.resolve().parent))
        name = path.stem
        mod_spec = importlib.util.spec_from_file_location(name, path)
        if mod_spec is None or mod_spec.loader is None:
            raise UsageError(f"kernel {spec!r}: cannot import {mod_part}")
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[name] = module
        try:
            mod_spec.loader.exec_module(module)
        except (Exception, SystemExit) as e:  # the user's module: a syntax error, or whatever it raises
            raise UsageError(f"kernel {spec!r}: importing {mod_part} raised {type(e).__name__}: {e}") from None
    else:
        try:
            module = importlib.import_module(mod_part)
        except ImportError as e:
            raise UsageError(f"kernel {spec!r}: cannot import {mod_part}: {e}") from None
        except (Exception, SystemExit) as e:
            raise UsageError(f"kernel {spec!r}: importing {mod_part} raised {type(e).__name__}: {e}") from None
    if "<locals>" in attr.split("."):
        return _load_local(module, attr, spec)
    obj: Any = module
    for a in attr.split("."):
        if not hasattr(obj, a):
            raise UsageError(f"kernel {spec!r}: {mod_part} has no attribute {attr!r}")
        obj = getattr(obj, a)
    return obj


def _load_local(module: Any, qualname: str, spec: str) -> Any:
    """A kernel defined inside a function (``test_cast.<locals>.kernel``, how Triton's own tests define theirs):
    its source, decorators included, run in its module's globals from a file of its own (Triton's ``@jit`` reads
    a kernel's source from its file). Names the enclosing function defines are not there: such a kernel fails
    here as it would if the enclosing function had bound them differently, loudly."""
    import atexit
    import shutil
    import tempfile
    import textwrap

    path = getattr(module, "__file__", None)
    if not path:
        raise UsageError(f"kernel {spec!r}: the module has no source file to find a local kernel in")
    source = Path(path).read_text()
    node: ast.AST = ast.parse(source)
    for name in [p for p in qualname.split(".") if p != "<locals>"]:
        found = next((n for n in ast.walk(node) if n is not node and getattr(n, "name", None) == name
                      and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))), None)
        if found is None:
            raise UsageError(f"kernel {spec!r}: {path} defines no {qualname!r}")
        node = found
    first = min([d.lineno for d in node.decorator_list] + [node.lineno])  # type: ignore[attr-defined]
    text = textwrap.dedent("".join(source.splitlines(keepends=True)[first - 1:node.end_lineno]))
    where = tempfile.mkdtemp(prefix="harness-local-kernel-")
    atexit.register(shutil.rmtree, where, True)
    file = Path(where) / Path(path).name
    file.write_text(text)
    namespace = dict(vars(module))
    exec(compile(text, str(file), "exec"), namespace)
    return namespace[node.name]  # type: ignore[attr-defined]


#: The flags the CLI's errors name where the Python API's would say ``signature=`` / ``constexprs=``.
FLAG_NAMES = ("--sig NAME=TYPE", "--const NAME=VALUE")


def _unwrap(obj: Any, consts: dict[str, Any]) -> tuple[Any, list[Any]]:
    """The ``@triton.jit`` function under ``@triton.autotune`` / ``@triton.heuristics`` and the autotune configs.
    A heuristic computes its value from the call's arguments, which a signature does not have: it must be given
    with ``--const``."""
    configs: list[Any] = []
    while hasattr(obj, "fn") and type(obj).__name__ in ("Autotuner", "Heuristics"):
        if type(obj).__name__ == "Autotuner":
            configs = list(obj.configs)
        else:
            missing = [k for k in obj.values if k not in consts]
            if missing:
                raise UsageError(f"{', '.join(missing)}: computed by @triton.heuristics from the call's arguments; "
                                 f"give {'each' if len(missing) > 1 else 'it'} with --const NAME=VALUE")
        obj = obj.fn
    return obj, configs


def _check_kernel(fn: Any, spec: str) -> None:
    """A UsageError unless ``fn`` (under its autotune/heuristics wrappers) is a ``@triton.jit`` kernel: said
    here, before inspect or Triton fail on it with a message that does not say what was expected."""
    from harness.interp.jit import interpreted_class, jit_class

    if not isinstance(fn, (jit_class(), interpreted_class())):
        raise UsageError(f"kernel {spec!r}: expected a @triton.jit kernel, got a {type(fn).__name__} ({fn!r:.80})")


def _defaults(fn: Any, consts: dict[str, Any], configs: list[Any]) -> dict[str, Any]:
    """``consts`` plus the Python defaults of constexpr parameters not given (``BLOCK: tl.constexpr = 128``) and
    placeholders for what every autotune config sets."""
    import inspect

    from harness.compile.autotune import config_values

    pyfn = getattr(fn, "fn", fn)
    from_configs = set.intersection(*(set(config_values(c)[0]) for c in configs)) if configs else set()
    out = dict(consts)
    for name, p in inspect.signature(pyfn).parameters.items():
        if name in out:
            continue
        if name in from_configs:
            out[name] = config_values(configs[0])[0][name]
        elif p.default is not inspect.Parameter.empty and "constexpr" in str(p.annotation):
            out[name] = p.default
    return out


def _warm_usage(args: argparse.Namespace) -> None:
    given = [flag for flag, v in (("a kernel", args.kernel), ("--sig", args.sig), ("--const", args.const),
                                  ("--targets", args.targets), ("--num-warps", args.num_warps),
                                  ("--num-stages", args.num_stages), ("--num-ctas", args.num_ctas),
                                  ("--maxnreg", args.maxnreg)) if v]
    if given:
        raise UsageError(f"--warm compiles a manifest's launches: {', '.join(given)} cannot be given with it")
    if os.path.exists(args.warm) and not os.path.isfile(args.warm):  # a FIFO would block the read forever
        raise UsageError(f"--warm {args.warm}: expected a manifest file (--harness-record-launches), got no regular "
                         f"file")
    if args.jobs is not None and args.jobs < 0:
        raise UsageError(f"--jobs: expected a number of processes (0: the CPU count), got {args.jobs}")
    if args.background is not None and args.done_file is not None:
        raise UsageError("--background runs the warm start with --done-file itself: give one of them")
    for flag, v in (("--background", args.background), ("--done-file", args.done_file)):
        if v is not None and not _file_path(v):
            raise UsageError(f"{flag}: expected a file path in an existing directory, got {v!r}")


def _file_path(v: str) -> bool:
    """Whether ``v`` can name a file to write: not empty, not a directory, in a directory that exists."""
    return bool(v) and not Path(v).is_dir() and Path(v).parent.is_dir()


def run_background(args: argparse.Namespace) -> int:
    """``--warm MANIFEST --background DONE``: this command again with ``--done-file DONE`` in a new session,
    its output to ``DONE.log``; returns once its pid is in ``DONE.pid`` (:mod:`harness.compile.background`)."""
    import subprocess

    from harness.compile import background

    try:
        if _file_path(args.background):
            background.clear(args.background)  # an earlier run's files go even when this one is refused below
        _warm_usage(args)
        if not (args.missing_ok and not Path(args.warm).exists()):
            from harness.compile.warm import read_manifest

            read_manifest(args.warm)  # a bad manifest is said here, not only in the log
    except (UsageError, ValueError) as e:
        print(f"harness compile: {e}", file=sys.stderr)
        return 2
    done = os.path.abspath(args.background)
    argv = [sys.executable, "-m", "harness", "compile", "--warm", args.warm, "--done-file", done]
    argv += [f"--jobs={args.jobs}"] if args.jobs is not None else []
    argv += [f"--warm-target={args.warm_target}"] if args.warm_target else []
    argv += ["--missing-ok"] if args.missing_ok else []
    with open(f"{done}.log", "w") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    background.write_pid(done, proc.pid)
    print(f"harness compile --warm: in the background (pid {proc.pid}, log {done}.log); a GPU-lane pytest with "
          f"{background.DONE_ENV}={done} waits for it before its first test")
    return 0


def run_warm(args: argparse.Namespace) -> int:
    """``--warm MANIFEST``: :func:`harness.compile.warm.warm`, one summary line, then each entry not compiled
    with why. Exit 0 (an entry the compiler refuses fails in the GPU run that launches it, as without a
    warm start), 2 for a usage error. With ``--done-file DONE``, DONE is written when it ends, whatever
    happens (:func:`harness.compile.background.write_done`)."""
    if args.background is not None:
        return run_background(args)
    try:
        _warm_usage(args)  # before anything is written: a DONE that cannot be written is said here
    except UsageError as e:
        print(f"harness compile: {e}", file=sys.stderr)
        return 2
    if args.done_file is None:
        return _run_warm(args)[0]
    from harness.compile import background

    rc, summary = 1, "the warm start raised (its log says what)"
    try:
        rc, summary = _run_warm(args)
    finally:
        background.write_done(args.done_file, rc, summary)
    return rc


def _run_warm(args: argparse.Namespace) -> tuple[int, str]:
    """The warm start on arguments :func:`_warm_usage` passed: its exit status and summary line."""
    from harness.compile.warm import read_manifest, warm

    try:
        if args.missing_ok and not Path(args.warm).exists():
            line = (f"harness compile --warm: no manifest {args.warm}; nothing warmed (the GPU run compiles as it "
                    f"launches)")
            print(line)
            return 0, line
        header, entries = read_manifest(args.warm)
        target = args.warm_target or header.get("target")
        if not target:
            raise UsageError(f"{args.warm}: the manifest names no target; give --warm-target (e.g. sm90)")
        jobs = args.jobs or os.cpu_count() or 1
        result = warm(entries, target=target, jobs=jobs, rootdir=Path.cwd())
    except (UsageError, ValueError, TypeError) as e:
        print(f"harness compile: {e}", file=sys.stderr)
        return 2, f"harness compile: {e}"
    from triton import knobs  # loaded by warm() already

    line = result.summary(args.warm, str(knobs.cache.dir))
    print(line)
    for outcome, kernel, why in result.details:
        print(f"  {outcome}: {kernel}: {why}")
    return 0, line


def run(args: argparse.Namespace) -> int:
    """The subcommand, on arguments parsed by ``python -m harness`` (harness.__main__)."""
    if args.warm is not None:
        return run_warm(args)
    warm_only = [flag for flag, given in (("--jobs", args.jobs), ("--warm-target", args.warm_target),
                                          ("--missing-ok", args.missing_ok or None), ("--background", args.background),
                                          ("--done-file", args.done_file)) if given is not None]
    if warm_only:
        print(f"harness compile: {', '.join(warm_only)}: only with --warm MANIFEST", file=sys.stderr)
        return 2
    compile_only_process()
    try:
        if args.kernel is None or not args.sig:
            raise UsageError("expected MODULE_OR_FILE::KERNEL and --sig NAME=TYPE,... (or --warm MANIFEST)")
        obj = _load_kernel(args.kernel)
        sig = dict(_pairs(args.sig, "--sig"))
        consts = {k: _const_value(k, v) for k, v in _pairs(args.const, "--const")}
        fn, configs = _unwrap(obj, consts)
        _check_kernel(fn, args.kernel)
        consts = _defaults(fn, consts, configs)
        targets = parse_targets(args.targets or DEFAULT_TARGETS)
        check_targets(targets)
        jit, full_sig, consts = prepare(fn, sig, consts, FLAG_NAMES)
    except (UsageError, ValueError, TypeError) as e:
        print(f"harness compile: {e}", file=sys.stderr)
        return 2
    opts = tuple(sorted((k, v) for k, v in (("num_warps", args.num_warps), ("num_stages", args.num_stages),
                                            ("num_ctas", args.num_ctas), ("maxnreg", args.maxnreg))
                        if v is not None))
    pyfn = jit.fn
    launch = Launch(f"{pyfn.__module__}.{pyfn.__qualname__}", getattr(pyfn.__code__, "co_filename", ""),
                    tuple((k, v) for k, v in full_sig.items() if v != "constexpr"),
                    tuple((k, consts[k]) for k in jit.arg_names if k in consts), opts, fn)
    from harness.compile.autotune import config_values

    given = {k for k, _ in _pairs(args.const, "--const")}
    launches = [launch]
    if configs:  # every config of the autotuner, each its (constexprs, num_warps, num_stages)
        launches = list(dict.fromkeys(
            launch.with_config({k: v for k, v in config_values(c)[0].items() if k not in given},
                               {k: v for k, v in config_values(c)[1].items() if (k, v) not in opts})
            for c in configs))
    rep = Report()
    names = [t.name for t in targets]
    findings = []
    for one in launches:
        findings += check(one, names, widen=not args.no_widen, report=rep)
    print(f"{launch.kernel}({launch.sig_text()})" + (f" constexprs {dict(launch.constexprs)}" if consts else "")
          + (f", {len(launches)} autotune configs" if configs else ""))
    cells = rep.count_cells()
    for line in render_matrix(cells, names):
        print(line)
    print(MATRIX_LEGEND)
    if has_lowering(cells):
        print(LOWERING_LEGEND)
    for f, ts in group(findings):
        print(format_finding(f, ts))
    print(format_capture_totals(rep.compiles, rep.cached, 0.0, "widening off" if args.no_widen else "widened",
                                str(cache_dir())).replace(" in 0.0s", ""))
    return 1 if findings else 0
