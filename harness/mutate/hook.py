"""The mutated module in a child process: an import hook that loads one file's mutated text under the module's
own name and file name, so the tests import the mutant exactly as they would import the real module.

Why a hook and not a copy of the tree: nothing is written next to the user's files, node ids, golden paths and
``rootdir`` stay the same, and every mutant gets a fresh process (no mutant leaks into another). Triton reads a
kernel's source through :mod:`linecache` (``inspect.getsource``), so the mutated lines are placed there too.

The child is told what to load by the environment (:data:`ENV`, a JSON file: ``path``, ``source``, ``loaded``);
``loaded`` is a file the loader creates when the mutant is imported, so the parent can tell a survivor from a
run that never imported it. No pytest here: :mod:`harness.mutate.plugin` installs it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import linecache
import os
import sys
from types import ModuleType
from typing import Any

__all__ = ["ENV", "install", "mutated_source"]

ENV = "HARNESS_MUTATE_MUTANT"

_LOADED: dict[str, str] = {}  # realpath -> the mutated text this process loaded in place of the file's


def mutated_source(path: str) -> str | None:
    """The mutated text this process loaded for the file ``path``, else ``None``. Why: a cache keyed by a module's
    source (launch capture's compile outcomes on disk) must hash what ran, not the unmutated file beneath it."""
    return _LOADED.get(os.path.realpath(path))


class _Loader(importlib.abc.Loader):
    def __init__(self, filename: str, source: str, loaded: str) -> None:
        self.filename, self.source, self.loaded = filename, source, loaded

    def create_module(self, spec: Any) -> ModuleType | None:
        return None

    def get_source(self, fullname: str) -> str:
        return self.source

    def exec_module(self, module: ModuleType) -> None:
        lines = self.source.splitlines(keepends=True)
        # mtime None: linecache.checkcache leaves the entry alone (it never re-reads the real file over it)
        linecache.cache[self.filename] = (len(self.source), None, lines, self.filename)
        _LOADED[os.path.realpath(self.filename)] = self.source
        code = compile(self.source, self.filename, "exec", dont_inherit=True)
        if self.loaded:
            with open(self.loaded, "a") as f:
                f.write(f"{module.__name__}\n")
        exec(code, module.__dict__)


class _Finder(importlib.abc.MetaPathFinder):
    """Answers for the one module whose file is the mutated path, whatever name it is imported under."""

    def __init__(self, path: str, source: str, loaded: str) -> None:
        self.real = os.path.realpath(path)
        self.loader = _Loader(os.path.abspath(path), source, loaded)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.origin or os.path.realpath(spec.origin) != self.real:
            return None
        return importlib.util.spec_from_file_location(fullname, spec.origin, loader=self.loader,
                                                      submodule_search_locations=spec.submodule_search_locations)


def install(environ: dict[str, str] | None = None) -> bool:
    """Put the mutant named by :data:`ENV` first on ``sys.meta_path`` (``True``), or do nothing (no mutant)."""
    spec = (os.environ if environ is None else environ).get(ENV)
    if not spec:
        return False
    with open(spec) as f:
        d = json.load(f)
    if any(isinstance(x, _Finder) for x in sys.meta_path):
        return True
    sys.meta_path.insert(0, _Finder(d["path"], d["source"], d.get("loaded", "")))
    return True
