"""The interpreter's scan for ``triton.language`` builtins, answered from memory (:mod:`harness.interp.builtin_scan`):
the same members as Triton's ``inspect.getmembers`` scan in every state a launch leaves the modules in, a fresh
scan after any change, and one scan per launch however many ``@jit`` calls the kernel makes."""

from __future__ import annotations

import inspect
import types

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter as itp

from harness.interp import builtin_scan
from harness.interp.builtin_scan import builtin_members
from harness.interp.patch import Patch, installed, lift

pytestmark = pytest.mark.interp_only

SCANNED = {"tl": tl, "tl.core": tl.core, "tl.math": tl.math, "tl.tensor": tl.tensor,
           "tensor_descriptor_base": tl.core.tensor_descriptor_base}


def _triton_scan(obj):
    return [(n, m) for n, m in inspect.getmembers(obj) if tl.core.is_builtin(m)]


def _same(got, want):
    return [n for n, _ in got] == [n for n, _ in want] and all(a is b for (_, a), (_, b) in zip(got, want, strict=True))


@triton.jit
def _twice(x):
    return x * 2


@triton.jit
def _helpers(x_ptr, y_ptr, N: tl.constexpr, CALLS: tl.constexpr):
    o = tl.arange(0, N)
    x = tl.load(x_ptr + o)
    for _ in tl.static_range(CALLS):  # each is an interpreted device call: a swap of the builtins
        x = _twice(x)
    tl.store(y_ptr + o, x + tl.sum(x, axis=0))


@pytest.mark.parametrize("name", sorted(SCANNED))
def test_members_are_the_scans_before_inside_and_after_a_launch(name):
    obj = SCANNED[name]
    assert _triton_scan(obj), f"{name}: no builtins found; the comparison would be empty"
    assert _same(builtin_members(obj), _triton_scan(obj))
    assert _same(builtin_members(obj), _triton_scan(obj))  # answered from memory
    scope = itp._patch_lang(_helpers.fn)  # the state inside a launch: the builtins swapped out
    try:
        inside = _triton_scan(obj)
        assert _same(builtin_members(obj), inside)
        assert _same(builtin_members(obj), inside)
    finally:
        scope.restore()
    assert _same(builtin_members(obj), _triton_scan(obj))


def test_a_launch_swaps_the_builtins_out_so_the_states_differ():
    before = _triton_scan(tl)
    scope = itp._patch_lang(_helpers.fn)
    try:
        assert len(_triton_scan(tl)) < len(before)
    finally:
        scope.restore()


@pytest.mark.parametrize("how", ["added", "replaced by a builtin", "replaced by a plain function", "deleted"])
def test_any_change_to_a_scanned_module_is_seen(how):
    mod = types.ModuleType("scanned_here")
    exec("from triton.language.core import builtin\n"  # noqa: S102 - a module of builtins made for this test
         "@builtin\ndef one(_semantic=None): return 1\n"
         "@builtin\ndef two(_semantic=None): return 2\n"
         "def plain(): return 3\n", mod.__dict__)
    assert _same(builtin_members(mod), _triton_scan(mod)) and [n for n, _ in builtin_members(mod)] == ["one", "two"]
    if how == "added":
        mod.three = mod.one
    elif how == "replaced by a builtin":
        mod.two = tl.core.builtin(lambda _semantic=None: 4)
    elif how == "replaced by a plain function":
        mod.one = mod.plain
    else:
        del mod.two
    assert _same(builtin_members(mod), _triton_scan(mod))
    assert _same(builtin_members(mod), _triton_scan(mod))


def test_a_class_change_in_its_bases_is_seen():
    class Base:
        @tl.core.builtin
        def op(self, _semantic=None):
            return 1

    class Derived(Base):
        pass

    assert [n for n, _ in builtin_members(Derived)] == ["op"]
    Base.other = Base.op
    assert _same(builtin_members(Derived), _triton_scan(Derived))
    assert [n for n, _ in builtin_members(Derived)] == ["op", "other"]


def test_the_session_installs_it_and_a_launch_scans_as_often_however_many_calls(monkeypatch):
    """Each launch swaps in builtins of its own (new objects), so each scans what it swapped in once; the calls
    inside it are answered from memory. Triton's own scan: four or more a call."""
    assert installed(itp, "_patch_builtin", builtin_scan.TAG)
    scans = []
    real = inspect.getmembers
    monkeypatch.setattr(inspect, "getmembers", lambda obj, *a: scans.append(obj) or real(obj, *a))
    x = torch.arange(16, dtype=torch.int32)
    y = torch.empty(16, dtype=torch.int32)
    _helpers[(1,)](x, y, N=16, CALLS=2)  # the first launch sees the modules' states for the first time
    outs, count = {}, {}
    for calls in (2, 12):
        scans.clear()
        _helpers[(1,)](x, y, N=16, CALLS=calls)
        outs[calls], count[calls] = y.clone(), len(scans)
    assert count[12] <= count[2] < 2 * len(SCANNED), count
    want = x * 2**12
    assert torch.equal(outs[12], want + want.sum())
    own = {}
    with lift(builtin_scan.TAG):  # Triton's own scan: the same outputs
        for calls in (2, 12):
            scans.clear()
            _helpers[(1,)](x, y, N=16, CALLS=calls)
            own[calls] = len(scans)
            assert torch.equal(y, outs[calls])
    # and as many scans for 12 calls as for 2: a device call from a module the launch already patched for does not
    # patch again (harness.interp.jit's launch tracking); four or more scans for each call of those that do
    assert own[12] == own[2] >= 4, own


def test_install_twice_patches_once_and_refuses_a_different_scan():
    assert builtin_scan.install(Patch()) is False  # the session's is in place
    with lift(builtin_scan.TAG), Patch.context() as p:
        p.setattr(itp, "_patch_builtin", lambda pkg, builder, scope: None, tag="test")
        assert builtin_scan.install(p) is False  # no getmembers scan in it: left alone
