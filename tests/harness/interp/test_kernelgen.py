"""Differential test: every generated kernel (kernelgen) that Triton's plain interpreter runs, the plugin runs,
with the same outputs except where a documented GPU model says otherwise.

Each case runs twice in this process: with every interpreter shim suspended (Triton's own interpreter) and with
the session's shims (the plugin). Then:

- plain runs, the plugin raises: a false failure, unless the error is the compiler's refusal that a model
  predicts (an FP8 cast or a ``tl.dot`` the arch does not lower) and Triton indeed does not compile the kernel
  for the arch;
- both run, outputs differ (bit patterns; NaN equals NaN): the difference must be one the case's models make.
  It is attributed by suspending exactly the shims of those models on the plugin's side: the outputs must then
  equal the plain interpreter's. A difference with no model, or one that survives that suspension, fails;
- plain raises, the plugin runs: what the plugin is for (Triton 3.9's interpreter on an all-NaN argmax);
- both raise: a kernel neither runs (counted, never a failure: the GPU compiler would refuse it too).

CI runs a fixed run of seeds. A longer or other run: ``KERNELGEN_SEED=<first> KERNELGEN_COUNT=<n>``, e.g.
``KERNELGEN_SEED=1000 KERNELGEN_COUNT=5000 TRITON_INTERPRET=1 pytest --harness-lane=interp
tests/harness/interp/test_kernelgen.py -s`` (``-s`` prints the outcomes by op class); ``KERNELGEN_EXAMPLES``
sets the hypothesis examples (0: none). A failure prints the one-seed command that reproduces it.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.harness.interp import kernelgen

pytestmark = pytest.mark.interp_only

triton = pytest.importorskip("triton")

SEED = int(os.environ.get("KERNELGEN_SEED", "47000"))
COUNT = int(os.environ.get("KERNELGEN_COUNT", "1500"))
EXAMPLES = int(os.environ.get("KERNELGEN_EXAMPLES", "100"))
CHUNKS = 4  # separate tests, so that xdist spreads a run over its workers

#: The shim modules each model's difference comes from (harness.interp.*).
_SHIMS_OF = {"bf16": ("arith",), "nan_reduce": ("arith",), "nan_minmax": ("arith",), "atomic_f16": ("arith",),
             "fp8": ("casts",), "approx": ("approx_math",), "dot": ("dots",)}
#: Newest install first: suspending in this order lifts each layer from the top.
_INSTALL_ORDER = ("casts", "arith", "approx_math", "dots")


@contextlib.contextmanager
def _suspended(names: set[str] | tuple[str, ...]) -> Iterator[None]:
    """The named shims lifted inside the block (all of them: Triton's own interpreter)."""
    from harness.interp import approx_math, arith, casts, dots

    modules = {"casts": casts, "arith": arith, "approx_math": approx_math, "dots": dots}
    with contextlib.ExitStack() as stack:
        for name in reversed(_INSTALL_ORDER):
            if name in names:
                stack.enter_context(modules[name].suspended())
        yield


def _refusal(e: BaseException) -> str | None:
    """The model whose compiler refusal ``e`` is (the GPU would not run the kernel either), else None."""
    from harness.interp.casts import CastRefusedError
    from harness.tensor_cores import DotRefused

    while e is not None:
        if isinstance(e, CastRefusedError):
            return "fp8"
        if isinstance(e, DotRefused):
            return "dot"
        e = e.__cause__ or e.__context__
    return None


def _run(kernel: Any, case: kernelgen.Case) -> dict[str, torch.Tensor] | BaseException:
    from harness.compile import launches

    args = case.args()
    names = list(case.tensors)
    try:
        # a capture block of its own: generated launches are not compiled for the matrix (minutes per run)
        with warnings.catch_warnings(), launches.capture():
            warnings.simplefilter("ignore")
            kernel[case.grid](*args, **case.constexprs, num_warps=case.num_warps)
    except Exception as e:  # noqa: BLE001 - any error is an outcome to compare
        return e
    return {n: args[names.index(n)] for n in case.outputs}


def _compiles(kernel: Any, case: kernelgen.Case) -> tuple[str, bool]:
    """(the session's arch, whether Triton compiles the case's launch for it): a kernel the interpreter refuses
    is the plugin's business only if the GPU runs it."""
    from harness.compile.disk_cache import compile_launch
    from harness.compile.launches import launch_from_args
    from harness.interp.casts import DEFAULT_TARGET, active_target

    target = getattr(active_target(), "name", None) or DEFAULT_TARGET
    launch = launch_from_args(kernel, tuple(case.args()), {**case.constexprs, "num_warps": case.num_warps})
    return target, compile_launch(launch, target).ok


def _bits(t: torch.Tensor) -> torch.Tensor:
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.contiguous().view(view)


def _differences(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> list[str]:
    out = []
    for name, x in a.items():
        y = b[name]
        same = _bits(x) == _bits(y)
        if x.is_floating_point():
            same |= torch.isnan(x.float()) & torch.isnan(y.float())
        if not bool(same.all()):
            bad = (~same).flatten().nonzero().flatten()
            k = int(bad[0])
            out.append(f"{name}: {bad.numel()} of {same.numel()} elements differ, first at flat index {k}: "
                       f"{x.flatten()[k].item()!r} vs {y.flatten()[k].item()!r}")
    return out


def _outcome(r: dict[str, torch.Tensor] | BaseException) -> str:
    if isinstance(r, BaseException):
        return f"raised {type(r).__name__}: {str(r)[-400:]}"
    return "ran: " + "; ".join(f"{n} = {t.flatten()[:16].tolist()}" for n, t in r.items())


def check(case: kernelgen.Case, directory: Path) -> tuple[str, str | None]:
    """(what happened, the failure's text or None) for one case."""
    kernel = kernelgen.load_kernel(case, directory)
    with _suspended(_INSTALL_ORDER):
        plain = _run(kernel, case)
    plugin = _run(kernel, case)

    def failure(why: str) -> str:
        return (f"{why}\nseed {case.seed}; reproduce: KERNELGEN_SEED={case.seed} KERNELGEN_COUNT=1 "
                f"KERNELGEN_EXAMPLES=0 TRITON_INTERPRET=1 pytest --harness-lane=interp {__file__} -s\n"
                f"{case.describe()}\nmodels: {sorted(case.models) or 'none'}\n{case.source}\n"
                f"plain interpreter: {_outcome(plain)}\nplugin: {_outcome(plugin)}")

    if isinstance(plain, BaseException):
        if not isinstance(plugin, BaseException):
            return "only the plugin runs", None
        target, compiled = _compiles(kernel, case)
        if compiled:
            return "false failure", failure(f"Neither Triton's interpreter nor the plugin runs a kernel that "
                                            f"Triton compiles for {target}: the plugin must run it as the GPU "
                                            f"does.")
        return "neither runs (nor compiles)", None
    if isinstance(plugin, BaseException):
        model = _refusal(plugin)
        if model not in case.models:
            return "false failure", failure("The plugin raised where Triton's interpreter runs the kernel.")
        target, compiled = _compiles(kernel, case)
        if compiled:
            return "false failure", failure(f"The plugin refused ({model} model) a kernel that Triton compiles "
                                            f"for {target}.")
        return f"refused ({model})", None
    diffs = _differences(plain, plugin)
    if not diffs:
        return "equal", None
    if not case.models:
        return "unexplained", failure("Outputs differ and no model of the kernel's ops explains it:\n"
                                      + "\n".join(diffs))
    shims = {s for m in case.models for s in _SHIMS_OF[m]}
    with _suspended(shims):
        lifted = _run(kernel, case)
    if isinstance(lifted, BaseException) or _differences(plain, lifted):
        return "unexplained", failure(f"Outputs differ and suspending the shims of the kernel's models "
                                      f"({sorted(shims)}) does not remove the difference:\n" + "\n".join(diffs)
                                      + f"\nwith those suspended: {_outcome(lifted)}")
    return "differs: " + "+".join(sorted(case.models)), None


def _check_many(seeds: range, directory: Path) -> None:
    outcomes: Counter[tuple[str, str]] = Counter()
    failures = []
    for seed in seeds:
        case = kernelgen.generate(seed)
        what, problem = check(case, directory)
        outcomes[(case.op_class, what)] += 1
        if problem:
            failures.append(problem)
    print(f"\nkernelgen seeds {seeds.start}..{seeds.stop - 1} on Triton {triton.__version__}:")
    for (cls, what), n in sorted(outcomes.items()):
        print(f"  {cls:12} {what:32} {n}")
    assert not failures, f"{len(failures)} of {len(seeds)} generated kernels failed; the first:\n{failures[0]}"


@pytest.mark.skipif(EXAMPLES == 0, reason="KERNELGEN_EXAMPLES=0")
@settings(max_examples=max(EXAMPLES, 1), derandomize=True, database=None,
          deadline=None, suppress_health_check=list(HealthCheck))
@given(rnd=st.randoms(use_true_random=False))
def test_generated_kernels_shrink(rnd, tmp_path_factory):
    """The same check on kernels drawn by hypothesis: a failure shrinks to the smallest kernel the grammar
    writes for it (hypothesis prints it, and ``@reproduce_failure`` to replay it)."""
    case = kernelgen.draw_case(rnd)
    _, problem = check(case, tmp_path_factory.getbasetemp())
    assert problem is None, problem


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_generated_kernels(chunk, tmp_path):
    step = -(-COUNT // CHUNKS)
    start = SEED + chunk * step
    _check_many(range(start, min(start + step, SEED + COUNT)), tmp_path)
