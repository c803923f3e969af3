"""Interpreter speed shim: the scan for ``triton.language`` builtins that every interpreted device call repeats,
answered from memory while the scanned module or class is unchanged.

Why: Triton's interpreter (3.6 and 3.9) swaps its builtins into ``triton.language`` not once per launch but on
every ``@jit`` call inside a kernel too (``InterpretedFunction.__call__``: each ``tl.sum``, ``tl.max``,
``tl.cdiv`` or user helper), and each swap runs ``_patch_builtin``: ``inspect.getmembers`` over ``tl``,
``tl.tensor``, ``tl.math`` and ``tl.core.tensor_descriptor_base``, keeping the members marked as builtins. That
scan was a fifth of the CPU time of the QSA and turboquant kernel tests (cProfile, Triton 3.9, 2026-12-06): about
0.1 ms a call, thousands of calls a test. Inside a launch the scanned modules hold the same objects call after
call, so the answer is the same.

:func:`install` replaces ``_patch_builtin`` (through the session's patch layer) by one that asks
:func:`builtin_members`: the members Triton's own scan finds, computed by that scan and reused only while the
``__dict__`` of every class the lookup reads (the module or the class's MRO, and its type's MRO) holds the same
names bound to the very same objects. Anything else (a module with its own ``__dir__``, a
class with a metaclass of its own) is scanned each time, as Triton does. The builtins found are then patched by
Triton's own ``_patch_attr``, so what the interpreter computes is unchanged.
"""

from __future__ import annotations

import inspect
import operator
import threading
import types
from dataclasses import dataclass
from typing import Any

from harness.interp.patch import Patch, installed, parameters, source_has

__all__ = ["TAG", "builtin_members", "install"]

#: The tag of this shim's record in the patch layer (:mod:`harness.interp.patch`).
TAG = "builtin_scan"
#: Snapshots kept per scanned object: the state before a launch's patch, inside it, inside its nested calls.
_KEEP = 8
#: ``type.__flags__`` bit of a type whose attributes cannot be set (``object``, ``type``, ``ModuleType``)
_IMMUTABLE = 1 << 8
_MISSING = object()

_lock = threading.Lock()
# id(obj) -> (obj, [_Snapshot], newest first); obj is kept so that its id is not reused
_memo: dict[int, tuple[Any, list[_Snapshot]]] = {}


@dataclass(frozen=True)
class _Snapshot:
    """What the dicts held when ``members`` was their scan: per dict its names, and its (name, object) bindings."""

    names: tuple[frozenset, ...]
    keys: tuple[tuple[str, ...], ...]
    values: tuple[tuple[Any, ...], ...]
    members: list[tuple[str, Any]]
    by_name: dict[str, Any]


def _scan(obj: Any) -> list[tuple[str, Any]]:
    """Triton's ``_patch_builtin`` scan: the ``(name, member)`` pairs of ``inspect.getmembers`` that are builtins."""
    from triton.language.core import is_builtin

    return [(name, member) for name, member in inspect.getmembers(obj) if is_builtin(member)]


def _dicts(obj: Any) -> tuple[Any, ...] | None:
    """The ``__dict__`` of every object whose attributes ``dir(obj)`` and ``getattr(obj, name)`` read and that can
    change (immutable types such as ``object`` and ``type`` cannot), or None when they may read anything else
    (a ``__dir__`` of the module's own, a metaclass other than ``type``)."""
    t = type(obj)
    if t is types.ModuleType:
        return None if "__dir__" in obj.__dict__ else (obj.__dict__,)
    if t is type:
        return tuple(c.__dict__ for c in obj.__mro__ if not c.__flags__ & _IMMUTABLE)
    return None


def _snapshot(dicts: tuple[Any, ...], members: list[tuple[str, Any]]) -> _Snapshot:
    return _Snapshot(tuple(frozenset(d) for d in dicts), tuple(tuple(d) for d in dicts),
                     tuple(tuple(d.values()) for d in dicts), members, dict(members))


def _same(dicts: tuple[Any, ...], snap: _Snapshot) -> bool:
    """Every dict holds the snapshot's names bound to the same objects (in any order: ``dir`` sorts them)."""
    return len(dicts) == len(snap.names) and all(
        d.keys() == names and all(map(operator.is_, map(d.__getitem__, keys), values))
        for d, names, keys, values in zip(dicts, snap.names, snap.keys, snap.values, strict=True))


def _still_scans_the_same(obj: Any, dicts: tuple[Any, ...], snap: _Snapshot) -> bool:
    """Whether ``obj``'s scan is still ``snap.members`` although some names are bound to other objects now: the
    same names, and each rebound name resolves to a non-builtin where it did before, or to the very same
    builtin. Inside a nested ``@jit`` call the modules differ from the enclosing call's only in swapped-in
    non-builtins (new ones per call), so this keeps such calls from scanning again."""
    from triton.language.core import is_builtin

    if len(dicts) != len(snap.names) or any(d.keys() != names for d, names in zip(dicts, snap.names, strict=True)):
        return False
    for d, keys, values in zip(dicts, snap.keys, snap.values, strict=True):
        for name, now, then in zip(keys, map(d.__getitem__, keys), values, strict=True):
            if now is then:
                continue
            member = getattr(obj, name, _MISSING)
            if member is _MISSING:
                return False  # getmembers would look further: scan
            was = snap.by_name.get(name, _MISSING)
            if (member is not was) if is_builtin(member) else (was is not _MISSING):
                return False
    return True


def builtin_members(obj: Any) -> list[tuple[str, Any]]:
    """The builtins ``inspect.getmembers(obj)`` lists, as ``(name, member)`` pairs sorted by name: Triton's scan,
    reused while what it read is unchanged (module docstring). The list is shared: do not modify it."""
    dicts = _dicts(obj)
    if dicts is None:
        return _scan(obj)
    with _lock:
        entry = _memo.get(id(obj))
        snaps = entry[1] if entry is not None and entry[0] is obj else []
        for i, snap in enumerate(snaps):
            if _same(dicts, snap):
                if i:
                    snaps.insert(0, snaps.pop(i))
                return snap.members
        newest = snaps[0] if snaps else None
    if newest is not None and _still_scans_the_same(obj, dicts, newest):
        members = newest.members
    else:
        members = _scan(obj)
    snap = _snapshot(dicts, members)
    if not _same(dicts, snap):  # changed meanwhile (another thread): answer, but do not keep
        return members
    with _lock:
        entry = _memo.get(id(obj))
        if entry is None or entry[0] is not obj:
            entry = _memo[id(obj)] = (obj, [])
        entry[1].insert(0, snap)
        del entry[1][_KEEP:]
    return members


def install(patch: Patch) -> bool:
    """Make the interpreter's ``_patch_builtin`` scan through :func:`builtin_members`, through ``patch``.

    ``False`` when nothing was patched: it is in place (an outer session's), or this Triton's ``_patch_builtin`` /
    ``_patch_attr`` take other arguments (left alone)."""
    try:
        from triton.runtime import interpreter as itp
    except ImportError:  # pragma: no cover - every supported triton has it
        return False
    orig = getattr(itp, "_patch_builtin", None)
    patch_attr = getattr(itp, "_patch_attr", None)
    if orig is None or patch_attr is None or installed(itp, "_patch_builtin", TAG):
        return False
    if parameters(orig) != ["pkg", "builder", "scope"] or parameters(patch_attr) != [
            "obj", "name", "member", "builder", "scope"]:
        return False
    if not source_has(orig, "inspect.getmembers(pkg)", "is_builtin(member)"):
        return False  # a Triton whose scan looks different: leave it alone

    def _patch_builtin(pkg: Any, builder: Any, scope: Any) -> None:
        for name, member in builtin_members(pkg):
            itp._patch_attr(pkg, name, member, builder, scope)

    patch.setattr(itp, "_patch_builtin", _patch_builtin, tag=TAG)
    return True
