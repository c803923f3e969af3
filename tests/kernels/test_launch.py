"""kernels._launch on a CPU box: which launches reuse a compiled kernel and which go back to Triton.

The direct launch itself needs a GPU (tests/kernels/qsa/test_qsa_hot_path.py and test_turboquant_inputs.py
compare it with ``kernel[grid]`` there); here a stand-in kernel records both kinds of launch, so the cache key
is checked on every lane: a hit must be a launch Triton would have specialized the same way.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from kernels import _launch


class _Compiled:
    """What ``kernel[grid](...)`` returns on a GPU, as far as the direct launch uses it."""

    function = "fn"
    packed_metadata = "meta"

    def __init__(self, log):
        self.log = log

    def launch_metadata(self, grid, stream, *args):
        self.log.append(("metadata", grid))
        return {"name": "stand_in"}

    def run(self, gx, gy, gz, stream, function, packed, meta, enter, exit_, *args):
        self.log.append(("direct", (gx, gy, gz), args))
        self.hooks = (meta, enter, exit_)


class _Kernel:
    """A stand-in ``@triton.jit`` kernel: three pointers, two ints (the second a token count), constexpr B."""

    __name__ = "stand_in"

    def __init__(self):
        self.params = [SimpleNamespace(name=n, is_constexpr=c) for n, c in
                       (("a_ptr", False), ("b_ptr", False), ("out", False), ("stride", False), ("n", False),
                        ("B", True))]
        self.log = []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.log.append(("triton", grid, args, kwargs))
            return _Compiled(self.log)
        return launch


@pytest.fixture
def cuda_stand_in(monkeypatch):
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(_launch, "_DRIVER", [SimpleNamespace(get_current_stream=lambda device: 7)])
    monkeypatch.setattr(_launch, "ENABLED", True)


def _tensors(offset=0):
    buf = torch.zeros(64, dtype=torch.float32)
    return buf[offset:offset + 8], torch.zeros(8, dtype=torch.float32), torch.zeros(8, dtype=torch.int32)


def _kinds(kernel):
    return [entry[0] for entry in kernel.log]


def test_a_hit_reuses_the_compiled_kernel_with_this_calls_arguments(cuda_stand_in):
    k = _Kernel()
    launcher = _launch.Launcher(k, tensors=3, classed=("n",))
    cfg = launcher.config({"B": 64}, {"num_warps": 1})
    a, b, out = _tensors()
    launcher((2,), (a, b, out, 32, 17), cfg)
    launcher((5, 3), (a, b, out, 32, 33), cfg)  # n 17 -> 33: the same class (not 1, not a multiple of 16)
    assert _kinds(k) == ["triton", "direct"]
    assert k.log[0][3] == {"B": 64, "num_warps": 1}
    assert k.log[1][1] == (5, 3, 1)
    assert k.log[1][2] == (a, b, out, 32, 33, 64), "the direct launch passes this call's values and the constexprs"


@pytest.mark.parametrize(
    "change",
    ["n multiple of 16", "n is 1", "n past int32", "other int value", "a off 16 bytes", "b dtype", "other config"],
)
def test_what_triton_specializes_on_goes_back_to_triton(change, cuda_stand_in):
    k = _Kernel()
    launcher = _launch.Launcher(k, tensors=3, classed=("n",))
    cfg = launcher.config({"B": 64}, {"num_warps": 1})
    a, b, out = _tensors()
    args = [a, b, out, 32, 17]
    launcher((1,), tuple(args), cfg)
    if change == "n multiple of 16":
        args[4] = 48
    elif change == "n is 1":
        args[4] = 1
    elif change == "n past int32":
        args[4] = 2**31 + 17
    elif change == "other int value":  # not classed: keyed by value
        args[3] = 33
    elif change == "a off 16 bytes":
        args[0] = _tensors(offset=1)[0]
    elif change == "b dtype":
        args[1] = b.double()
    else:
        cfg = launcher.config({"B": 128}, {"num_warps": 1})
    launcher((1,), tuple(args), cfg)
    launcher((1,), tuple(args), cfg)
    assert _kinds(k) == ["triton", "triton", "direct"]


def test_the_plain_path_where_the_launcher_cannot_key(cuda_stand_in, monkeypatch):
    k = _Kernel()
    launcher = _launch.Launcher(k, tensors=3)
    cfg = launcher.config({"B": 64}, {"num_warps": 1})
    a, b, out = _tensors()
    launcher((1,), (a, b, out, 32, 17.5), cfg)  # a float where an int was expected: never cached
    launcher((1,), (a, b, out, 32, 17.5), cfg)
    launcher((1,), (a, b, out, 32), cfg)  # not every runtime argument
    monkeypatch.setattr(_launch, "ENABLED", False)
    launcher((1,), (a, b, out, 32, 17), cfg)
    launcher((1,), (a, b, out, 32, 17), cfg)
    assert _kinds(k) == ["triton"] * 5


def test_the_cache_is_bounded(cuda_stand_in, monkeypatch):
    monkeypatch.setattr(_launch, "MAX_ENTRIES", 4)
    k = _Kernel()
    launcher = _launch.Launcher(k, tensors=3)
    cfg = launcher.config({"B": 64}, {"num_warps": 1})
    a, b, out = _tensors()
    for stride in range(10):
        launcher((1,), (a, b, out, stride, 17), cfg)
    assert len(launcher._compiled) <= 4
    assert _kinds(k) == ["triton"] * 10


def test_bad_launcher_arguments_are_named():
    with pytest.raises(ValueError, match=r"classed names \['m'\] are not int parameters"):
        _launch.Launcher(_Kernel(), tensors=3, classed=("m",))
    with pytest.raises(ValueError, match=r"classed names \['out'\] are not int parameters after its 3"):
        _launch.Launcher(_Kernel(), tensors=3, classed=("out",))
    with pytest.raises(TypeError, match=r"stand_in: constexprs \['B'\] must be given"):
        _launch.Launcher(_Kernel(), tensors=3).config({}, {})


def test_launcher_for_gives_one_launcher_per_kernel_object_and_options():
    a, b = _Kernel(), _Kernel()
    la = _launch.launcher_for(a, tensors=3, classed=("n",))
    assert _launch.launcher_for(a, tensors=3, classed=("n",)) is la
    assert _launch.launcher_for(b, tensors=3, classed=("n",)) is not la  # a swapped-in kernel: its own
    assert _launch.launcher_for(a, tensors=3) is not la
    assert _launch.launcher_for(b, tensors=3, classed=("n",)).kernel is b


def test_a_planned_layout_keeps_its_compiled_kernel_and_launches_it_with_the_callers_tensors(cuda_stand_in,
                                                                                            monkeypatch):
    """``launch_planned``: the first launch of a class goes through the launcher with the viewed arguments and
    keeps the kernel it compiled; the next of that class launches it with the caller's own tensors, never
    building the views; another class, or ``ENABLED = False``, goes back to the launcher (which keeps nothing
    when it launches through ``kernel[grid]``)."""
    k = _Kernel()
    launcher = _launch.Launcher(k, tensors=3, classed=("n",))
    cfg = launcher.config({"B": 64}, {"num_warps": 1})
    a, b, out = _tensors()
    views = []

    def viewed(n):
        views.append(n)
        return (a.view(torch.int32), b, out, 32, n)

    kept = {}
    _launch.launch_planned(launcher, kept, "x", (2,), cfg, (a, b, out, 32, 17), lambda: viewed(17))
    assert _kinds(k) == ["triton"] and views == [17] and list(kept) == ["x"]
    _launch.launch_planned(launcher, kept, "x", (3,), cfg, (a, b, out, 32, 19), lambda: viewed(19))
    assert _kinds(k) == ["triton", "direct"] and views == [17], "a kept class builds no views"
    assert k.log[1][1] == (3, 1, 1) and k.log[1][2] == (a, b, out, 32, 19, 64)
    assert k.log[1][2][0] is a, "the caller's tensor, not a view of it"
    _launch.launch_planned(launcher, kept, "y", (4,), cfg, (a, b, out, 32, 32), lambda: viewed(32))
    assert views == [17, 32] and len(kept) == 2
    monkeypatch.setattr(_launch, "ENABLED", False)
    _launch.launch_planned(launcher, kept, "x", (5,), cfg, (a, b, out, 32, 21), lambda: viewed(21))
    fresh = {}
    _launch.launch_planned(launcher, fresh, "z", (5,), cfg, (a, b, out, 32, 21), lambda: viewed(21))
    assert views == [17, 32, 21, 21] and _kinds(k)[-2:] == ["triton", "triton"] and fresh == {}


@pytest.mark.parametrize("enter, leave", [("empty", "empty"), (None, None), ("hooked", "empty"), ("empty", "hooked"),
                                          ("plain", None)])
def test_launch_hooks_are_passed_only_where_they_call_something(enter, leave, cuda_stand_in, monkeypatch):
    """Triton 3.5+'s hook chains are never None: an empty one is passed as None and no launch metadata is built
    (the launcher then calls nothing, as the empty chain would); a chain holding a hook, or a plain function (an
    older Triton's hook), is passed as is, with the metadata both hooks receive."""
    import triton

    made = {"empty": lambda: triton.knobs.HookChain(), "hooked": lambda: _chain(), "plain": lambda: print,
            None: lambda: None}
    hooks = triton.knobs.runtime
    monkeypatch.setattr(hooks, "launch_enter_hook", made[enter]())
    monkeypatch.setattr(hooks, "launch_exit_hook", made[leave]())
    log = []
    compiled = _Compiled(log)
    _launch.run_compiled(compiled, (3,), (1, 2))
    calls = [e for e in (enter, leave) if e not in ("empty", None)]
    assert [e[0] for e in log] == (["metadata"] if calls else []) + ["direct"]
    meta, got_enter, got_leave = compiled.hooks
    assert meta == ({"name": "stand_in"} if calls else None)
    assert got_enter is (hooks.launch_enter_hook if enter in ("hooked", "plain") else None)
    assert got_leave is (hooks.launch_exit_hook if leave == "hooked" else None)


def _chain():
    import triton

    chain = triton.knobs.HookChain()
    chain.add(lambda metadata: None)
    return chain


def test_int_class_groups_ints_exactly_as_triton_specializes_them():
    """Two ints share an ``int_class`` exactly when the installed Triton specializes them alike (its own
    ``native_specialize_impl``, as the JIT's binder calls it): the classed launcher keys and the turboquant plans
    rely on it to reuse a compiled kernel for another token or slot count."""
    from triton.backends.compiler import BaseBackend
    from triton.runtime.jit import native_specialize_impl

    edges = [2**31, 2**63]
    values = [1, 2, 15, 16, 17, 32, 48, 1000, -1, -16, -(2**31), -(2**31) - 1, -(2**31) - 16]
    values += [e + d for e in edges for d in (-16, -1, 0, 1, 16)]
    triton_key = {v: native_specialize_impl(BaseBackend, v, False, True, True) for v in values}
    for a in values:
        for b in values:
            assert (_launch.int_class(a) == _launch.int_class(b)) == (triton_key[a] == triton_key[b]), (a, b)
