"""The one undo layer (harness.interp.patch): records, reverse undo, tags, lift, installed, and the order rule."""

from __future__ import annotations

import os
import types

import pytest

from harness.interp.patch import Patch, installed, lift

pytestmark = pytest.mark.lane_independent


def _target() -> types.SimpleNamespace:
    return types.SimpleNamespace(f="own")


class _Base:
    def m(self) -> str:
        return "base"


class _Child(_Base):
    pass


def test_undo_replays_in_reverse_and_deletes_what_was_absent():
    t = _target()
    p = Patch()
    p.setattr(t, "f", "one", tag="a")
    p.setattr(t, "f", "two", tag="b")
    p.setattr(t, "g", "new", tag="a")
    assert (t.f, t.g) == ("two", "new")
    p.undo()
    assert t.f == "own" and not hasattr(t, "g")
    p.undo()  # a second undo has nothing left to do
    assert t.f == "own"


def test_an_inherited_method_comes_back_by_deletion():
    p = Patch()
    p.setattr(_Child, "m", lambda self: "patched", tag="a")
    assert _Child().m() == "patched" and _Base().m() == "base"
    p.undo()
    assert "m" not in _Child.__dict__ and _Child().m() == "base"


def test_items_and_environment():
    d = {"k": 1}
    name = "HARNESS_TEST_PATCH_VAR"
    assert name not in os.environ
    with Patch.context() as p:
        p.setitem(d, "k", 2, tag="a")
        p.setitem(d, "new", 3, tag="a")
        p.delitem(d, "absent", tag="a")  # nothing to remove, nothing recorded
        p.setenv(name, "x", tag="env")
        assert d == {"k": 2, "new": 3} and os.environ[name] == "x"
        p.setenv(name, None, tag="env")
        assert name not in os.environ
        p.delitem(d, "k", tag="b")
        assert d == {"new": 3}
    assert d == {"k": 1} and name not in os.environ


def test_bad_arguments_name_what_was_expected():
    p = Patch()
    with pytest.raises(TypeError, match="tag must be a non-empty str"):
        p.setattr(_target(), "f", 1, tag="")
    with pytest.raises(TypeError, match=r"setenv\('X'\): value must be a str or None, got int"):
        p.setenv("X", 5, tag="env")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="name must be a non-empty str"):
        p.setenv("", "v", tag="env")
    with pytest.raises(TypeError, match="name at least one tag"):
        p.lift()


def test_installed_follows_the_live_record_of_that_tag():
    t = _target()
    with Patch.context() as p:
        assert not installed(t, "f", "a")
        p.setattr(t, "f", "one", tag="a")
        assert installed(t, "f", "a") and not installed(t, "f", "b")
        p.setattr(t, "f", "two", tag="b")
        assert installed(t, "f", "b") and not installed(t, "f", "a")  # a's value is no longer in place
    assert not installed(t, "f", "a") and not installed(t, "f", "b")


def test_installed_sees_through_a_wrapper_that_names_it_and_not_through_lift():
    t = _target()

    def shim() -> str:
        return "shim"

    def over() -> str:
        return shim()

    def replaces() -> str:
        return "other"

    over.__wrapped__ = shim  # type: ignore[attr-defined]
    with Patch.context() as p:
        p.setattr(t, "f", shim, tag="a")
        p.setattr(t, "f", over, tag="b")
        assert installed(t, "f", "a") and installed(t, "f", "b")  # b calls through to a: a is still in effect
        with lift("a"):
            assert t.f == "own" and not installed(t, "f", "a")
        p.setattr(t, "f", replaces, tag="c")
        assert not installed(t, "f", "a") and installed(t, "f", "c")


def test_lift_reaches_under_every_layer_of_the_tag_and_only_that_tag():
    t = _target()
    d = {"row": "differs"}
    with Patch.context() as outer:
        outer.setattr(t, "f", "shim-outer", tag="shim")
        outer.setattr(t, "h", "other", tag="other")
        outer.setitem(d, "row", None, tag="shim")
        with Patch.context() as inner:  # a nested session installs the shim again
            inner.setattr(t, "f", "shim-inner", tag="shim")
            with lift("shim"):
                assert t.f == "own" and d["row"] == "differs" and t.h == "other"
                assert not installed(t, "f", "shim")
            assert t.f == "shim-inner" and d["row"] is None and installed(t, "f", "shim")
        assert t.f == "shim-outer"
    assert t.f == "own" and not hasattr(t, "h") and d == {"row": "differs"}


def test_lift_for_a_layers_lifetime_is_undone_with_it():
    t = _target()
    with Patch.context() as outer:
        outer.setattr(t, "f", "shim", tag="shim")
        with Patch.context() as session:
            session.lift("shim", tag="off")
            assert t.f == "own"
        assert t.f == "shim"


def test_layers_must_be_undone_innermost_first():
    t = _target()
    outer, inner = Patch(), Patch()
    outer.setattr(t, "f", "outer", tag="a")
    inner.setattr(t, "f", "inner", tag="a")
    with pytest.raises(RuntimeError, match="innermost first; a newer layer still replaces 'f' \\(tag 'a'\\)"):
        outer.undo()
    assert t.f == "inner"  # nothing was undone
    inner.undo()
    outer.undo()
    assert t.f == "own"


def test_a_replacement_made_outside_the_layer_is_left_alone():
    t = _target()
    p = Patch()
    p.setattr(t, "f", "ours", tag="a")
    t.f = "someone else's"
    p.undo()
    assert t.f == "someone else's"
