"""``assert_deterministic`` and ``assert_batch_invariant``: the same call gives the same bits every time, and a
row's result does not depend on the rows launched with it.

Why both, and why bits: DeepGEMM tests determinism by repeating a launch and comparing bit for bit (its #444
was a kernel that was not), and vLLM's batch-invariance work defines a kernel as batch-invariant when a request's
logits are the same bits in any batch. A float ``atomic_add`` whose order follows the scheduler fails the first;
a kernel that picks its reduction split by the batch size, or reads a neighbouring row, fails the second.

On the interpreter lane programs run one after the other in a fixed order, so scheduling nondeterminism does not
show there: determinism checks the host side (launcher state, caches, an input the call consumes); batch
invariance checks the kernel's logic in full (a row that reads another row's data, a split chosen by the batch
size), since the interpreter computes what the GPU computes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from harness.replay import results
from harness.replay.bits import Report, check_tensor, compare, compare_all, flatten, format_difference
from harness.text import Msg, check_msg, with_msg

__all__ = ["assert_batch_invariant", "assert_deterministic"]

_BITS = "bit for bit (NaN payloads and the sign of zero included)"


def _fn_name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def _callable(fn: Any) -> None:
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")


def _outputs(fn: Any, value: Any, run: str) -> list[tuple[str, torch.Tensor]]:
    """The run's outputs, cloned: a function that returns the same buffer each time must not compare it with
    itself."""
    return [(n, t.clone()) for n, t in flatten(value, "return", f"fn={_fn_name(fn)} ({run})")]


def _lane(outs: Sequence[tuple[str, torch.Tensor]]) -> str:
    return "cuda" if any(t.is_cuda for _, t in outs) else "interpreter"


def assert_deterministic(fn: Callable[..., Any], *args: Any, repeats: int = 20, msg: Msg = None) -> None:
    """``fn(*args)`` ``repeats`` times; every run's outputs (a tensor or a tuple/list/dict of them) must be run 1's
    bits. The report names the first run and output that differ, the first differing element (index, both
    words and values) and how many runs differ."""
    __tracebackhide__ = True
    check_msg(msg)
    _callable(fn)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 2:
        raise ValueError(f"repeats must be an int >= 2 (run 1 is the reference, so fewer runs compare nothing), "
                         f"got {repeats!r}")
    first = _outputs(fn, fn(*args), "run 1")
    bad_runs: list[int] = []
    report: Report | None = None
    for i in range(2, repeats + 1):
        diffs = compare_all(first, _outputs(fn, fn(*args), f"run {i}"))
        if diffs:
            bad_runs.append(i)
            if report is None:
                report = Report(header=f"Results are not deterministic! (fn={_fn_name(fn)})", left="run 1",
                                right=f"run {i}", differences=diffs)
    results.record("deterministic", _fn_name(fn), passed=report is None,
                   detail={"lane": _lane(first), "repeats": repeats, "differing_runs": len(bad_runs)})
    if report is not None:
        report.where = (f"Runs that differ from run 1: {len(bad_runs)} of {repeats - 1} ("
                        + ", ".join(map(str, bad_runs[:10])) + (", ..." if len(bad_runs) > 10 else "") + ")")
        report.rule = f"{repeats} runs of the same call are the same {_BITS}"
        raise AssertionError(with_msg(format_difference(report), msg))


# ------------------------------------------------------------------------------------------ batch invariance


def _batched(x: Any) -> tuple[list[tuple[str, torch.Tensor]], str]:
    """``x`` as named tensors and how ``fn`` takes them: ``"one"`` (fn(x)), ``"args"`` (fn(*x)), ``"kwargs"``."""
    if isinstance(x, torch.Tensor):
        named, how = [("x", x)], "one"
    elif isinstance(x, (tuple, list)) and x:
        named, how = [(f"x[{i}]", t) for i, t in enumerate(x)], "args"
    elif isinstance(x, Mapping) and x:
        named, how = [(f"x[{k!r}]", t) for k, t in x.items()], "kwargs"
    else:
        raise TypeError(f"x must be a tensor, or a non-empty tuple/list/dict of tensors (fn's batched arguments), "
                        f"got {type(x).__name__}" + (" (empty)" if isinstance(x, (tuple, list, Mapping)) else ""))
    if how == "kwargs":
        for k in x:
            if not isinstance(k, str) or not k.isidentifier():
                raise TypeError(f"x: key {k!r} is not an argument name (fn is called with **x)")
    for name, t in named:
        check_tensor(t, name, "a tensor")
    return named, how


def _dim(batch_dim: Any, named: list[tuple[str, torch.Tensor]]) -> int:
    if isinstance(batch_dim, bool) or not isinstance(batch_dim, int):
        raise TypeError(f"batch_dim must be an int, got {type(batch_dim).__name__}")
    for name, t in named:
        if not -t.dim() <= batch_dim < t.dim():
            raise ValueError(f"batch_dim={batch_dim} is out of range for {name} of shape {tuple(t.shape)} (expected "
                             f"{-t.dim()} <= batch_dim < {t.dim()})" if t.dim() else
                             f"{name} is 0-dim: it has no batch_dim to split along")
    return batch_dim


def _rows(named: list[tuple[str, torch.Tensor]], dim: int) -> int:
    sizes = {name: t.shape[dim] for name, t in named}
    n = next(iter(sizes.values()))
    if any(s != n for s in sizes.values()):
        raise ValueError(f"the batched arguments disagree on their rows along batch_dim={dim}: {sizes}")
    if n < 2:
        raise ValueError(f"x has {n} row(s) along batch_dim={dim}; batch invariance needs at least 2")
    return n


def _splits(splits: Any, n: int, dim: int) -> list[int]:
    if splits is None:
        return [1] * n
    if isinstance(splits, (str, bytes)) or not isinstance(splits, Sequence) or not splits:
        raise TypeError(f"splits must be a non-empty sequence of row counts summing to {n}, got "
                        f"{type(splits).__name__}")
    bad = [s for s in splits if isinstance(s, bool) or not isinstance(s, int) or s < 1]
    if bad:
        raise ValueError(f"splits must be row counts >= 1, got {bad[0]!r} in {list(splits)}")
    if sum(splits) != n:
        raise ValueError(f"splits must cover the {n} rows of x along batch_dim={dim} exactly; {list(splits)} sums to "
                         f"{sum(splits)}")
    return list(splits)


def _call(fn: Any, parts: list[torch.Tensor], how: str, x: Any) -> Any:
    if how == "one":
        return fn(parts[0])
    if how == "args":
        return fn(*parts)
    return fn(**dict(zip(x.keys(), parts, strict=True)))


def _checked(fn: Any, value: Any, run: str, whole: list[tuple[str, torch.Tensor]] | None, dim: int,
             rows: int) -> list[tuple[str, torch.Tensor]]:
    """A run's outputs; each must have ``rows`` rows along ``dim`` and otherwise the whole batch's shape and dtype
    (``ValueError`` naming the run and output: such a fn is not row-wise, so the check cannot be made)."""
    outs = _outputs(fn, value, run)
    if whole is not None and [n for n, _ in outs] != [n for n, _ in whole]:
        raise ValueError(f"fn={_fn_name(fn)} returned outputs {[n for n, _ in outs]} for the {run}, "
                         f"{[n for n, _ in whole]} for the whole batch")
    for i, (name, t) in enumerate(outs):
        if not -t.dim() <= dim < t.dim() or t.shape[dim] != rows:
            raise ValueError(f"fn={_fn_name(fn)}: output {name!r} of the {run} has shape {tuple(t.shape)}; expected "
                             f"{rows} rows along batch_dim={dim}, one per row of x")
        if whole is not None:
            want = list(whole[i][1].shape)
            want[dim] = rows
            if list(t.shape) != want or t.dtype != whole[i][1].dtype:
                raise ValueError(f"fn={_fn_name(fn)}: output {name!r} of the {run} has shape {tuple(t.shape)} and "
                                 f"dtype {t.dtype}; the whole batch's rows suggest {tuple(want)} and "
                                 f"{whole[i][1].dtype}")
    return outs


def assert_batch_invariant(fn: Callable[..., Any], x: Any, batch_dim: int = 0, splits: Sequence[int] | None = None,
                           *, msg: Msg = None) -> None:
    """``fn`` on the whole batch ``x``, on consecutive pieces of it (``splits``: row counts, default every row
    alone) and on the rows reversed: each row's outputs must be the same bits in every run.

    ``x``: a tensor (``fn(x)``) or a tuple/list (``fn(*x)``) or dict (``fn(**x)``) of tensors sharing their rows
    along ``batch_dim``; every output of ``fn`` has those rows along ``batch_dim`` too. The report names the
    first row that differs, the run it differed in (which rows shared its launch), the output, the element
    (index, both words and values)."""
    __tracebackhide__ = True
    check_msg(msg)
    _callable(fn)
    named, how = _batched(x)
    dim = _dim(batch_dim, named)
    n = _rows(named, dim)
    sizes = _splits(splits, n, dim)
    tensors = [t for _, t in named]
    whole = _checked(fn, _call(fn, tensors, how, x), "whole batch", None, dim, n)
    first: tuple[int, Report] | None = None
    bad_runs = 0
    runs: list[tuple[str, int, int, bool]] = []  # (label, start, rows, reversed)
    start = 0
    for i, size in enumerate(sizes):
        alone = "launched alone" if size == 1 else f"with {size - 1} other row(s)"
        runs.append((f"split {i + 1} of {len(sizes)} (rows {start}..{start + size - 1}, {alone})", start, size,
                     False))
        start += size
    runs.append((f"reversed batch (rows {n - 1}..0)", 0, n, True))
    for label, start, size, rev in runs:
        if rev:
            parts = [t.flip(dim) for t in tensors]
        else:
            parts = [t.narrow(dim, start, size).contiguous() for t in tensors]
        outs = _checked(fn, _call(fn, parts, how, x), label.split(" (")[0], whole, dim, size)
        if rev:
            outs = [(name, t.flip(dim)) for name, t in outs]
        diffs = []
        for (name, w), (_, got) in zip(whole, outs, strict=True):
            d = compare(name, w.narrow(dim, start, size), got)
            if d is not None:
                d.index = tuple(i + start if j == dim % w.dim() else i for j, i in enumerate(d.index))
                diffs.append(d)
        if not diffs:
            continue
        bad_runs += 1
        diffs.sort(key=lambda d: d.index[dim % len(d.index)])  # the output whose differing row is lowest first
        row = diffs[0].index[dim % len(diffs[0].index)]
        if first is None or row < first[0]:
            first = (row, Report(header=f"Batch results differ! (fn={_fn_name(fn)})", left="whole batch",
                                 right=label.split(" (")[0], differences=diffs,
                                 where=f"Row {row} of {n} (batch_dim={dim}) changes with the rows launched with it: "
                                       f"in the {label}"))
    results.record("batch_invariant", _fn_name(fn), passed=first is None,
                   detail={"lane": _lane(whole), "rows": n, "splits": len(sizes), "differing_runs": bad_runs})
    if first is not None:
        report = first[1]
        report.notes.append(f"Runs that differ from the whole batch: {bad_runs} of {len(runs)} (the splits "
                            f"{sizes[:8]}{'...' if len(sizes) > 8 else ''}, then the batch reversed)")
        report.rule = (f"each row's outputs are the same {_BITS} in the whole batch, in every split and in the "
                       "batch reversed")
        raise AssertionError(with_msg(format_difference(report), msg))
