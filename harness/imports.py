"""Run a callback once a module has been imported, whenever that happens.

Why: the plugin is loaded into every pytest run of a project that installs it, and most of those runs (or most
of their workers) never touch Triton. The interpreter shims and the autotune wrapper replace attributes of
Triton's classes, so they need Triton imported; importing it at configure time would cost every run its import
and torch's. :func:`after_import` defers the install to the moment the project imports Triton itself: a
test module at collection, a conftest, or a test body.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import itertools
import sys
import threading
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

from harness.interp.patch import Patch

__all__ = ["after_import", "flush"]


class _Loader(importlib.abc.Loader):
    """The module's own loader, with the callback run after the module has executed."""

    def __init__(self, inner: Any, done: Callable[[], None]) -> None:
        self._inner = inner
        self._done = done

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        self._done()

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, is_package … as the inner loader
        return getattr(self._inner, name)


#: module name -> the callbacks waiting for its import, in registration order (each entry a patch record, so a
#: layer undone before the import takes its callbacks with it)
_pending: dict[str, dict[int, Callable[[], None]]] = {}
_ids = itertools.count()


def _harness_initializing() -> bool:
    """Whether a harness module is in the middle of its own import (it imported the module being waited for):
    the callbacks, which import harness modules, would then meet it half-initialized."""
    return any(getattr(getattr(m, "__spec__", None), "_initializing", False)
               for n, m in list(sys.modules.items()) if n == "harness" or n.startswith("harness."))


def flush() -> None:
    """Run the callbacks whose module is imported but which had to wait for a harness module's import to finish
    (the plugins call this before collection ends and before each test)."""
    if not any(_pending.values()):  # nothing waits (every test of a run once Triton is in): no scan of sys.modules
        return
    if _harness_initializing():
        return
    for name in [n for n, waiting in _pending.items() if waiting and n in sys.modules]:
        _fire(name)


def _fire(name: str) -> None:
    if _harness_initializing():
        return  # flush() runs them
    waiting = _pending.get(name, {})
    callbacks = list(waiting.values())
    waiting.clear()
    for callback in callbacks:
        try:
            callback()
        except Exception as e:  # never turn the project's own import into an error of the harness
            warnings.warn(f"harness: what the harness installs once {name} is imported failed: "
                          f"{type(e).__name__}: {e}", RuntimeWarning, stacklevel=2)


class _Finder(importlib.abc.MetaPathFinder):
    """A trigger on ``sys.meta_path``: it finds ``name`` as the path would and runs every waiting callback once
    the module has executed. Several may sit there (one per layer that waits); the first one asked fires."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._busy = threading.local()

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name or not _pending.get(fullname) or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is None:  # another finder's module (a zip, a frozen one): ask the rest of the path
                for finder in sys.meta_path:
                    if finder is self or not hasattr(finder, "find_spec"):
                        continue
                    spec = finder.find_spec(fullname, path, target)
                    if spec is not None:
                        break
        finally:
            self._busy.on = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader, lambda: _fire(fullname))
        return spec


def after_import(patch: Patch, name: str, callback: Callable[[], None], *, tag: str) -> None:
    """Call ``callback()`` once, right after the top-level module ``name`` is first imported (now, if it already
    is). The wait and its hook on ``sys.meta_path`` are records of ``patch``: undone with it."""
    if "." in name:
        raise ValueError(f"after_import: {name!r}: name a top-level module (its package runs first)")
    if name in sys.modules:
        callback()
        return
    patch.setitem(_pending.setdefault(name, {}), next(_ids), callback, tag=tag)
    patch.insert(sys.meta_path, 0, _Finder(name), tag=tag)
