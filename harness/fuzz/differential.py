"""The differential rule on the CPU: a generated kernel (:mod:`.kernelgen`) that Triton's own interpreter runs, the
plugin's interpreter runs too, with the same outputs except where a documented GPU model says otherwise.

Each case runs twice in this process: with every model shim lifted (Triton's own interpreter) and with the
installed shims (the plugin). Then:

- plain runs, the plugin raises: a false failure, unless the error is the compiler's refusal that a model
  predicts (an FP8 cast or a ``tl.dot`` the arch does not lower) and Triton indeed does not compile the kernel
  for the arch;
- both run, outputs differ (bit patterns; NaN equals NaN): the difference must be one the case's models make.
  It is attributed by lifting exactly the shims of those models on the plugin's side: the outputs must then
  equal the plain interpreter's. A difference with no model, or one that survives the lift, fails;
- plain raises, the plugin runs: what the plugin is for (Triton 3.9's interpreter on an all-NaN argmax);
- both raise: a kernel neither runs. A failure only if Triton compiles it for the arch (the GPU runs it).

Why here and not in a test module: the same run is what ``python -m harness fuzz`` does on a CPU box, and what
the GPU comparison (:mod:`.gpu`) builds on.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.fuzz import kernelgen
from harness.fuzz.kernelgen import Case

__all__ = ["MODEL_SHIMS", "Verdict", "bits", "check", "differences", "plain_interpreter", "run_case"]

#: The shims (their patch tags, :mod:`harness.interp`) each model's difference comes from.
MODEL_SHIMS: dict[str, tuple[str, ...]] = {
    "bf16": ("arith",), "nan_reduce": ("arith", "lowering"), "nan_minmax": ("arith",),
    "atomic_f16": ("arith",), "fp8": ("casts",), "approx": ("approx_math",), "dot": ("dots", "scaled_dots"),
    "lowering": ("lowering",), "fp_to_int": ("arith",), "canonical_nan": ("arith",),
}
#: Every model shim: lifted together, the interpreter is Triton's own (the jit fixes stay: they only let the
#: interpreter run what Triton's compiler accepts).
_ALL = ("casts", "arith", "approx_math", "dots", "scaled_dots", "lowering")


@dataclass(frozen=True)
class Verdict:
    """What happened to one case (``outcome``, counted by op class) and, if it is a failure, why (``problem``:
    the kernel's source, its seed and the two outcomes, so that it reproduces in one command)."""

    outcome: str
    problem: str | None = None


def plain_interpreter() -> contextlib.AbstractContextManager[None]:
    """Triton's own interpreter inside the block: every model shim of every live session lifted."""
    return _lifted(_ALL)


def _lifted(tags: tuple[str, ...] | set[str]) -> contextlib.AbstractContextManager[None]:
    from harness.interp.patch import lift

    return lift(*sorted(tags))


def run_case(kernel: Any, case: Case, device: str = "cpu") -> dict[str, Any] | BaseException:
    """Launch ``case`` once on fresh copies of its arguments: its outputs by name, or what it raised."""
    from harness.compile import launches

    args = case.args(device)
    names = list(case.tensors)
    try:
        # a capture block of its own: generated launches are not compiled for the matrix (minutes per run)
        with warnings.catch_warnings(), launches.capture():
            warnings.simplefilter("ignore")
            kernel[case.grid](*args, **case.constexprs, num_warps=case.num_warps)
    except Exception as e:  # noqa: BLE001 - any error is an outcome to compare
        return e
    return {n: args[names.index(n)] for n in case.outputs}


def bits(t: Any) -> Any:
    """A tensor's bit patterns (an integer view of the same width), on the CPU."""
    import torch

    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.detach().cpu().contiguous().view(view)


def differences(a: dict[str, Any], b: dict[str, Any], nan_equal: bool = True) -> list[str]:
    """One line per output whose bits differ (NaN equals any NaN with ``nan_equal``): how many, and the first."""
    import torch

    out = []
    for name, x in a.items():
        y = b[name]
        same = bits(x) == bits(y)
        if nan_equal and x.is_floating_point():
            same |= torch.isnan(x.detach().cpu().float()) & torch.isnan(y.detach().cpu().float())
        if not bool(same.all()):
            bad = (~same).flatten().nonzero().flatten()
            k = int(bad[0])
            out.append(f"{name}: {bad.numel()} of {same.numel()} elements differ, first at flat index {k}: "
                       f"{x.flatten()[k].item()!r} vs {y.flatten()[k].item()!r}")
    return out


def outcome_text(r: dict[str, Any] | BaseException) -> str:
    if isinstance(r, BaseException):
        return f"raised {type(r).__name__}: {str(r)[-400:]}"
    return "ran: " + "; ".join(f"{n} = {t.flatten()[:16].tolist()}" for n, t in r.items())


def refusal(e: BaseException | None) -> str | None:
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


def compiles(kernel: Any, case: Case) -> tuple[str, bool]:
    """(the session's arch, whether Triton compiles the case's launch for it): a kernel the interpreter refuses
    is the plugin's business only if the GPU runs it."""
    from harness.compile.disk_cache import compile_launch
    from harness.compile.launches import launch_from_args
    from harness.interp.casts import DEFAULT_TARGET, active_target

    target = getattr(active_target(), "name", None) or DEFAULT_TARGET
    launch = launch_from_args(kernel, tuple(case.args()), {**case.constexprs, "num_warps": case.num_warps})
    return target, compile_launch(launch, target).ok


def check(case: Case, directory: str | Path | None = None, reproduce: str = "") -> Verdict:
    """The differential rule for one case (module docstring). ``directory``: where the kernel's file is written
    (:func:`.kernelgen.load_kernel`'s default: the harness cache). ``reproduce``: the command that reruns one
    seed, printed with a failure (``{seed}`` is replaced)."""
    kernel = kernelgen.load_kernel(case, directory)
    with plain_interpreter():
        plain = run_case(kernel, case)
    plugin = run_case(kernel, case)

    def failure(kind: str, why: str) -> Verdict:
        how = reproduce.replace("{seed}", str(case.seed)) if reproduce else ""
        return Verdict(kind, f"{why}\nseed {case.seed}{'; reproduce: ' + how if how else ''}\n{case.describe()}\n"
                       f"models: {sorted(case.models) or 'none'}\n{case.source}\n"
                       f"plain interpreter: {outcome_text(plain)}\nplugin: {outcome_text(plugin)}")

    if isinstance(plain, BaseException):
        if not isinstance(plugin, BaseException):
            return Verdict("only the plugin runs")
        target, compiled = compiles(kernel, case)
        if compiled:
            return failure("false failure", f"Neither Triton's interpreter nor the plugin runs a kernel that "
                           f"Triton compiles for {target}: the plugin must run it as the GPU does.")
        return Verdict("neither runs (nor compiles)")
    if isinstance(plugin, BaseException):
        model = refusal(plugin)
        if model not in case.models:
            return failure("false failure", "The plugin raised where Triton's interpreter runs the kernel.")
        target, compiled = compiles(kernel, case)
        if compiled:
            return failure("false failure", f"The plugin refused ({model} model) a kernel that Triton compiles "
                           f"for {target}: it raised where the GPU runs it.")
        return Verdict(f"refused ({model})")
    diffs = differences(plain, plugin)
    if not diffs:
        return Verdict("equal")
    if not case.models:
        return failure("unexplained",
                       "Outputs differ and no model of the kernel's ops explains it:\n" + "\n".join(diffs))
    shims = {s for m in case.models for s in MODEL_SHIMS[m]}
    with _lifted(shims):
        lifted = run_case(kernel, case)
    if isinstance(lifted, BaseException) or differences(plain, lifted):
        return failure("unexplained", f"Outputs differ and lifting the shims of the kernel's models "
                       f"({sorted(shims)}) does not remove the difference:\n" + "\n".join(diffs)
                       + f"\nwith those lifted: {outcome_text(lifted)}")
    return Verdict("differs: " + "+".join(sorted(case.models)))


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The shims' warnings (what the interpreter cannot model) silenced: a fuzz run reports outcomes, not them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
