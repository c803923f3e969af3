"""``assert_graph_replay``: a call captured in a CUDA graph and replayed on fresh inputs gives the eager bits.

What the replay catches that an eager test cannot: a launcher that caches a device pointer or a tensor derived
from an input (the graph keeps reading the old one), that reads an input's values on the host (a grid or a
length baked into the graph), that allocates its output outside what is captured, or a kernel that leaves part
of its output unwritten (the output holds the poison). The check, as vLLM's and FlashInfer's capture tests and
the reviewers of TensorRT-LLM #18765 and FlashInfer #4690 do it: warm up on a side stream, capture, copy fresh
inputs into the captured buffers, poison every output, replay, compare with an eager call on the fresh inputs.

The caller says what is input and what is output: ``fn(**inputs, **outputs)`` is the call; ``outputs`` are
buffers it writes in place (a KV cache); what it returns is output too. The check works on clones, so the
caller's tensors are left as they were.

Without CUDA (the interpreter lane) there is no graph. The same sequence runs with two eager calls: the first on
the buffers (the capture), then the fresh values are copied into those same buffers, the outputs poisoned, and a
second call (the replay) is compared with a call on new buffers holding the fresh values. Every tensor the
replay call allocates with ``torch.empty*`` starts as poison, every one the reference call allocates as zeros.
That checks: (1) a result computed from values copied into buffers the function has already seen equals the
result from new buffers (a launcher that caches a derived tensor or a pointer by address fails); (2) every
element of every output is written (poison left, or an uninitialized scratch read); (3) two calls agree. It
cannot see what only capture shows: a host sync (capture refuses it) and a host-side value baked into the
graph, which an eager call recomputes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from harness.replay import results
from harness.replay.bits import POISON_NOTE, Report, check_tensor, compare_all, flatten, format_difference, poison
from harness.text import Msg, check_msg, with_msg

__all__ = ["assert_graph_replay"]

_ALLOCS = ("empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "empty_permuted")


class _FilledAllocations(TorchDispatchMode):
    """Every tensor allocated with ``torch.empty*`` under it is filled: with poison, or with zeros."""

    def __init__(self, with_poison: bool) -> None:
        super().__init__()
        self.with_poison = with_poison

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        packet = getattr(func, "overloadpacket", None)
        fill = getattr(packet, "__name__", "") in _ALLOCS and isinstance(out, torch.Tensor)
        if fill and out.numel() and not out.is_complex():
            if self.with_poison:
                poison(out)
            else:
                out.zero_()
        return out


def _fn_name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def _tensors(arg: Any, name: str, *, required: bool) -> dict[str, torch.Tensor]:
    if arg is None and not required:
        return {}
    if not isinstance(arg, Mapping) or (required and not arg):
        what = "a non-empty dict" if required else "a dict"
        raise TypeError(f"{name} must be {what} of argument name -> tensor, got {type(arg).__name__}"
                        + (" (empty)" if isinstance(arg, Mapping) else ""))
    for k, v in arg.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise TypeError(f"{name}: key {k!r} is not an argument name (fn is called with **{name})")
        check_tensor(v, f"{name}[{k!r}]", "a tensor")
    return dict(arg)


def _fresh_values(fresh: Any, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    values = fresh() if callable(fresh) else fresh
    if not isinstance(values, Mapping):
        raise TypeError(f"fresh must be a dict of input name -> tensor or a callable returning one, got "
                        f"{type(values).__name__}" + (" from the callable" if callable(fresh) else ""))
    if set(values) != set(inputs):
        raise ValueError(f"fresh must give a value for each input and nothing else: inputs {sorted(inputs)}, "
                         f"fresh {sorted(values)}")
    for k, v in values.items():
        check_tensor(v, f"fresh[{k!r}]", "a tensor")
        if v.shape != inputs[k].shape or v.dtype != inputs[k].dtype:
            raise ValueError(f"fresh[{k!r}] has shape {tuple(v.shape)} and dtype {v.dtype}; the captured input has "
                             f"{tuple(inputs[k].shape)} and {inputs[k].dtype} (a graph replays fixed shapes)")
    return dict(values)


def _count(warmup: Any) -> int:
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 1:
        raise ValueError(f"warmup must be an int >= 1 (calls before the capture, which compile), got {warmup!r}")
    return warmup


def _clones(ts: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in ts.items()}


def assert_graph_replay(
    fn: Callable[..., Any],
    inputs: Mapping[str, torch.Tensor],
    fresh: Mapping[str, torch.Tensor] | Callable[[], Mapping[str, torch.Tensor]],
    *,
    outputs: Mapping[str, torch.Tensor] | None = None,
    warmup: int = 1,
    msg: Msg = None,
) -> None:
    """Capture ``fn(**inputs, **outputs)``, copy ``fresh`` into the captured inputs, poison every output, replay,
    and require the eager call's bits on the fresh inputs (with the same poisoned in-place outputs).

    CUDA when any tensor given is on a CUDA device, else the interpreter lane's two-call check (module
    docstring). ``fresh``: values of the same shapes and dtypes for every input, or a callable making them.
    ``outputs``: buffers ``fn`` writes in place. ``warmup``: calls before the capture (compiles)."""
    __tracebackhide__ = True
    check_msg(msg)
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    ins = _tensors(inputs, "inputs", required=True)
    outs = _tensors(outputs, "outputs", required=False)
    both = sorted(set(ins) & set(outs))
    if both:
        raise ValueError(f"inputs and outputs both name {both}; an argument is one or the other (a buffer read and "
                         "written in place is an output: the eager reference starts from the same poisoned copy)")
    n_warm = _count(warmup)
    values = _fresh_values(fresh, ins)
    cuda = any(t.is_cuda for t in (*ins.values(), *outs.values()))
    run = _replay_cuda if cuda else _replay_eager
    report = run(fn, ins, outs, values, n_warm)
    results.record("graph_replay", _fn_name(fn), passed=report is None,
                   detail={"lane": "cuda-graph" if cuda else "interpreter", "inputs": sorted(ins),
                           "outputs": sorted(outs)})
    if report is not None:
        raise AssertionError(with_msg(format_difference(report), msg))


def _returned(fn: Any, value: Any, outs: dict[str, torch.Tensor], run: str) -> list[tuple[str, torch.Tensor]]:
    """What a call returned, as outputs; ``None`` is nothing when ``outputs`` names buffers written in place."""
    if value is None and outs:
        return []
    if value is None:
        raise TypeError(f"fn={_fn_name(fn)} ({run}) returned None and outputs= names no buffer it writes: nothing to "
                        "compare (return the outputs, or name the buffers written in place in outputs=)")
    return flatten(value, "return", f"fn={_fn_name(fn)} ({run})")


def _report(fn: Any, diffs: list[Any], cuda: bool) -> Report | None:
    if not diffs:
        return None
    how = "a CUDA graph" if cuda else "a second call on the same buffers (interpreter lane: no CUDA graph)"
    return Report(
        header=f"Graph replay differs from an eager run! (fn={_fn_name(fn)})",
        left="eager", right="replay", differences=diffs,
        where=f"Replayed: {how}, after fresh inputs were copied into the captured ones",
        notes=[f"Poison: {POISON_NOTE}"],
        rule="the replay's outputs equal an eager call's on the same fresh inputs, bit for bit (NaN payloads "
             "included)",
    )


#: The error torch's sync debug mode raises (c10/cuda/CUDAFunctions.cpp, ``warn_or_error_on_sync``).
_SYNC_ERROR = "synchronizing CUDA operation"


def _refuse_host_syncs(fn: Any, s_in: dict[str, torch.Tensor], s_out: dict[str, torch.Tensor],
                       side: torch.cuda.Stream) -> None:
    """One more call, after the warmup, with torch's sync debug mode on: a call that waits for the device cannot be
    captured, and the capture is not attempted. Why not let the capture fail: a capture refused midway can leave
    torch's CUDA state unusable for the rest of the process, and so for every later test of an xdist worker."""
    __tracebackhide__ = True
    torch.cuda.synchronize()
    mode = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with torch.cuda.stream(side):
            fn(**s_in, **s_out)
    except RuntimeError as e:
        if _SYNC_ERROR not in str(e):
            raise
        raise AssertionError(f"fn={_fn_name(fn)} cannot be captured in a CUDA graph: it synchronizes with the host "
                             f"after its warmup (torch.cuda.set_sync_debug_mode('error'): {e}); the capture was not "
                             "attempted") from e
    finally:
        torch.cuda.set_sync_debug_mode(mode)
    torch.cuda.current_stream().wait_stream(side)


def _replay_cuda(fn: Any, ins: dict[str, torch.Tensor], outs: dict[str, torch.Tensor],
                 values: dict[str, torch.Tensor], warmup: int) -> Report | None:
    __tracebackhide__ = True
    s_in, s_out = _clones(ins), _clones(outs)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compiles and first-call allocations off the capture, as torch's docs do
        for _ in range(warmup):
            fn(**s_in, **s_out)
    torch.cuda.current_stream().wait_stream(side)
    _refuse_host_syncs(fn, s_in, s_out, side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            ret = fn(**s_in, **s_out)
    except Exception as e:  # noqa: BLE001 - any failure to capture is the check's failure, with its cause
        raise AssertionError(f"fn={_fn_name(fn)} cannot be captured in a CUDA graph: {type(e).__name__}: {e}") from e
    returned = _returned(fn, ret, outs, "capture")
    for k, v in values.items():
        s_in[k].copy_(v)
    inputs_memory = {t.untyped_storage().data_ptr() for t in s_in.values()}
    for t in (*s_out.values(), *(t for _, t in returned)):
        if t.untyped_storage().data_ptr() not in inputs_memory:  # a returned input (or a view of one) stays input
            poison(t)
    e_out = _clones(s_out)
    graph.replay()
    torch.cuda.synchronize()
    e_in = {k: v.to(ins[k].device, copy=True) for k, v in values.items()}
    with _FilledAllocations(with_poison=False):
        e_ret = fn(**e_in, **e_out)
    eager = list(e_out.items()) + _returned(fn, e_ret, outs, "eager")
    replayed = list(s_out.items()) + returned
    diffs = compare_all(eager, replayed)
    del graph
    return _report(fn, diffs, True)


def _replay_eager(fn: Any, ins: dict[str, torch.Tensor], outs: dict[str, torch.Tensor],
                  values: dict[str, torch.Tensor], warmup: int) -> Report | None:
    s_in, s_out = _clones(ins), _clones(outs)
    for _ in range(warmup):
        fn(**s_in, **s_out)  # the capture's call: the function sees these buffers first
    for k, v in values.items():
        s_in[k].copy_(v)
    for t in s_out.values():
        poison(t)
    e_out = _clones(s_out)
    with _FilledAllocations(with_poison=True):
        ret = fn(**s_in, **s_out)
    replayed = list(s_out.items()) + _returned(fn, ret, outs, "replay")
    e_in = {k: v.clone() for k, v in values.items()}
    with _FilledAllocations(with_poison=False):
        e_ret = fn(**e_in, **e_out)
    eager = list(e_out.items()) + _returned(fn, e_ret, outs, "eager")
    return _report(fn, compare_all(eager, replayed), False)
