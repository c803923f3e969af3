"""One undo layer for everything the harness replaces in Triton, torch or the process environment.

Why one layer: the interpreter shims, launch capture, the autotune wrapper and the compile listener all replace
attributes of objects they do not own, and a pytest session nested in a test (pytester) installs its own on top
of the outer session's. Each replacement must come off exactly once, innermost first, and a test must be able to
look under a shim ("what does Triton's own interpreter compute here?"). :class:`Patch` does this the way
pytest's ``MonkeyPatch`` does: every change records ``(target, name, old)`` before it is made, and
:meth:`Patch.undo` replays the records in reverse. A record also carries a *tag* (the shim that made it), which
is what :func:`installed` and :func:`lift` ask about.

A session owns one :class:`Patch` and undoes it when it closes; a test or a script takes a scoped one with
:meth:`Patch.context`. Nothing here imports Triton, torch or pytest.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import os
import threading
import types
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Patch", "installed", "lift"]


class _Absent:
    """What a record holds as ``old`` when the attribute or key did not exist: undo deletes it again."""

    def __repr__(self) -> str:
        return "<absent>"


_ABSENT = _Absent()

_lock = threading.RLock()
_order = itertools.count()
_live: list[Patch] = []  # every layer holding records, oldest first (sessions nest, so this is a stack)


@dataclass(frozen=True)
class _Record:
    kind: Literal["attr", "item", "list"]
    target: Any
    name: Any
    old: Any
    new: Any
    tag: str
    seq: int


def _current(kind: str, target: Any, name: Any) -> Any:
    if kind == "list":  # name: the inserted object itself; present or not
        return name if any(x is name for x in target) else _ABSENT
    if kind == "item":
        return target.get(name, _ABSENT)
    # A class's or module's own attribute, not an inherited one: undoing a replacement of an inherited method
    # deletes it again. An instance's may live behind a descriptor of its class (Triton's knobs): read it.
    own = getattr(target, "__dict__", None)
    if own is not None and (name in own or isinstance(target, (type, types.ModuleType))):
        return own.get(name, _ABSENT)
    return getattr(target, name, _ABSENT)


def _put(kind: str, target: Any, name: Any, value: Any) -> None:
    if kind == "list":
        if value is _ABSENT:
            target[:] = [x for x in target if x is not name]
        elif not any(x is name for x in target):
            target.insert(0, name)
        return
    if kind == "item":
        if value is _ABSENT:
            target.pop(name, None)
        else:
            target[name] = value
    elif value is _ABSENT:
        if name in getattr(target, "__dict__", {}):
            delattr(target, name)
    else:
        setattr(target, name, value)


class Patch:
    """One layer of recorded replacements; :meth:`undo` takes them all back, newest first."""

    def __init__(self) -> None:
        self._records: list[_Record] = []

    @classmethod
    @contextlib.contextmanager
    def context(cls) -> Iterator[Patch]:
        """A layer undone when the block ends (a test's or a script's own patches)."""
        p = cls()
        try:
            yield p
        finally:
            p.undo()

    def setattr(self, target: object, name: str, value: Any, *, tag: str) -> None:
        """Replace ``target.name`` by ``value`` (``name`` need not exist yet)."""
        self._record("attr", target, name, value, tag)

    def setitem(self, mapping: MutableMapping[Any, Any], key: Any, value: Any, *, tag: str) -> None:
        """Set ``mapping[key] = value``."""
        self._record("item", mapping, key, value, tag)

    def delitem(self, mapping: MutableMapping[Any, Any], key: Any, *, tag: str) -> None:
        """Remove ``mapping[key]`` (nothing happens, and nothing is recorded, when it is absent)."""
        if key in mapping:
            self._record("item", mapping, key, _ABSENT, tag)

    def setenv(self, name: str, value: str | None, *, tag: str) -> None:
        """Set (or, with ``None``, unset) the environment variable ``name``."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"Patch.setenv: name must be a non-empty str, got {name!r}")
        if value is not None and not isinstance(value, str):
            raise TypeError(f"Patch.setenv({name!r}): value must be a str or None, got {type(value).__name__}")
        if value is None:
            self.delitem(os.environ, name, tag=tag)
        else:
            self.setitem(os.environ, name, value, tag=tag)

    def insert(self, seq: list[Any], index: int, item: Any, *, tag: str) -> None:
        """Insert ``item`` into the list ``seq`` at ``index`` (``sys.meta_path``, say); undo removes it."""
        if not isinstance(tag, str) or not tag:
            raise TypeError(f"Patch: tag must be a non-empty str naming the shim, got {tag!r}")
        with _lock:
            self._records.append(_Record("list", seq, item, _ABSENT, item, tag, next(_order)))
            if self not in _live:
                _live.append(self)
            seq.insert(index, item)

    def lift(self, *tags: str, tag: str = "lift") -> None:
        """Put back, in this layer, what was there before any live layer's ``tags`` patched it: every layer
        of those shims (a nested session's too) is out of the way until this layer is undone."""
        if not tags:
            raise TypeError("Patch.lift: name at least one tag")
        with _lock:
            first: dict[tuple[str, int, Any], _Record] = {}
            for r in _live_records():
                if r.tag in tags and r.kind != "list":
                    first.setdefault((r.kind, id(r.target), r.name), r)
            for r in first.values():
                self._record(r.kind, r.target, r.name, r.old, tag)

    def undo(self) -> None:
        """Take back every record of this layer, newest first. A value someone else has replaced since (not
        through a layer) is left as they left it: it is no longer ours to remove."""
        with _lock:
            mine = {(r.kind, id(r.target), r.name): r.seq for r in self._records}
            later = [r for p in _live if p is not self for r in p._records
                     if mine.get((r.kind, id(r.target), r.name), r.seq) < r.seq]
            if later:
                raise RuntimeError(f"Patch.undo: layers must be undone innermost first; a newer layer still "
                                   f"replaces {later[0].name!r} (tag {later[0].tag!r})")
            for r in reversed(self._records):
                if _still(r):
                    _put(r.kind, r.target, r.name, r.old)
            self._records.clear()
            if self in _live:
                _live.remove(self)

    def _record(self, kind: Literal["attr", "item"], target: Any, name: Any, value: Any, tag: str) -> None:
        if not isinstance(tag, str) or not tag:
            raise TypeError(f"Patch: tag must be a non-empty str naming the shim, got {tag!r}")
        with _lock:
            old = _current(kind, target, name)
            self._records.append(_Record(kind, target, name, old, value, tag, next(_order)))
            if self not in _live:
                _live.append(self)
            _put(kind, target, name, value)

    def __repr__(self) -> str:
        tags = sorted({r.tag for r in self._records})
        return f"<Patch {len(self._records)} records{': ' + ', '.join(tags) if tags else ''}>"


def _still(r: _Record) -> bool:
    """Whether ``r``'s value is still in place (``os.environ`` hands out a new str at each read: compare those)."""
    now = _current(r.kind, r.target, r.name)
    return now is r.new or (r.kind == "item" and isinstance(r.new, str) and now == r.new)


def _live_records() -> list[_Record]:
    return sorted((r for p in _live for r in p._records), key=lambda r: r.seq)


def installed(target: object, name: str, tag: str) -> bool:
    """Whether ``target.name`` is, right now, what a live record tagged ``tag`` put there, or a wrapper that
    calls through to it and says so with ``__wrapped__`` (``functools.wraps``' attribute): a shim layered on top
    of another, as the lowering shim's ``create_fdiv`` is on approximate math's, leaves it in effect. ``False``
    inside :func:`lift` of that tag, and after its layer is undone."""
    with _lock:
        ours = {id(r.new) for p in _live for r in p._records
                if r.kind == "attr" and r.target is target and r.name == name and r.tag == tag}
        now, seen = _current("attr", target, name), set()
        while now is not None and id(now) not in seen:
            if id(now) in ours:
                return True
            seen.add(id(now))
            now = getattr(now, "__wrapped__", None)
        return False


def parameters(fn: Any) -> list[str] | None:
    """The parameter names of ``fn``, or None when it has no inspectable signature: a shim replaces a private
    Triton function only when it still takes what the shim passes on."""
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None


def source_has(fn: Any, *needles: str) -> bool:
    """Whether ``fn``'s source holds every one of ``needles``: the other guard a shim takes before replacing a
    private Triton function whose body it relies on (False when the source cannot be read)."""
    try:
        body = inspect.getsource(fn)
    except (OSError, TypeError):
        return False
    return all(n in body for n in needles)


@contextlib.contextmanager
def lift(*tags: str) -> Iterator[None]:
    """Triton's (or torch's) own behaviour inside the block for the shims ``tags``, every layer of them lifted;
    the shims again after. To measure what a shim replaces, or to model it."""
    with Patch.context() as p:
        p.lift(*tags)
        yield
