"""What the tests launched: a kernel x launched dtype/format x arch map, and the ``@triton.jit`` kernels of named
packages that no test launched (``--harness-coverage=PACKAGE[,...]``).

Why: "which kernels have no test at all" has no answer in a suite that only counts test functions. Launch capture
(:mod:`harness.compile.launches`) already sees every interpreted launch, typed from the real arguments; this map
keeps what was launched as run, not the widened variants capture compiles besides, so a dtype appears only when
some test ran the kernel with it.

Kernels are found by reading the package's source (no module is imported): a function decorated with ``jit``
(``@triton.jit``, ``@jit``, under ``@triton.autotune`` / ``@triton.heuristics`` too) that no other jit function of
the package calls is a kernel; the ones called are device helpers, launched through their callers. A kernel that no
test can launch on the CPU lane says why in place, on its ``def`` line or the line above its decorators::

    # harness-coverage: <why no test launches it>

This module imports without pytest; :mod:`harness.coverage.plugin` holds the option and the report.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["JUSTIFY", "SECTION", "Kernel", "Map", "kernels_of", "launched_types", "package_dir"]

SECTION = "coverage"
#: The in-place justification of a kernel no test launches.
JUSTIFY = re.compile(r"#\s*harness-coverage:\s*(\S.*)$")


def launched_types(launch: Any) -> str:
    """The launch's tensor element types and FP8 formats, in argument order: ``bf16 u8 i64 | e4nv``."""
    seen: list[str] = []
    for _, ty in launch.signature:
        if ty.startswith("*") and ty[1:] not in seen:
            seen.append(ty[1:])
    fmts = sorted(launch.fp8_formats())
    return " ".join(seen) + (f" | {','.join(fmts)}" if fmts else "") or "-"


class Map:
    """The session's ``coverage`` section: launches per (kernel, launched types, arch), and the tests that made
    them."""

    def __init__(self, packages: tuple[str, ...] = (), fail: bool = False) -> None:
        self.packages = packages
        self.fail = fail
        self.cells: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.test = ""
        self.arch = "-"

    def add(self, launch: Any) -> None:
        cell = self.cells.setdefault((launch.kernel, launched_types(launch), self.arch),
                                     {"launches": 0, "tests": set()})
        cell["launches"] += 1
        if self.test:
            cell["tests"].add(self.test)

    def to_worker(self) -> list[dict[str, Any]]:
        return [{"kernel": k, "types": t, "arch": a, "launches": c["launches"], "tests": sorted(c["tests"])}
                for (k, t, a), c in sorted(self.cells.items())]

    def merge(self, data: Iterable[dict[str, Any]]) -> None:
        for d in data:
            cell = self.cells.setdefault((d["kernel"], d["types"], d["arch"]), {"launches": 0, "tests": set()})
            cell["launches"] += int(d["launches"])
            cell["tests"].update(d.get("tests", ()))

    def launched(self) -> set[str]:
        return {k for k, _, _ in self.cells}

    def unlaunched(self) -> tuple[list[Kernel], list[Kernel]]:
        """(not launched, not launched but justified in place) over :attr:`packages`."""
        got = self.launched()
        missing = [k for p in self.packages for k in kernels_of(p) if k.name not in got]
        return [k for k in missing if k.reason is None], [k for k in missing if k.reason is not None]

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cells": [{**d, "tests": len(d["tests"])} for d in self.to_worker()]}
        if self.packages:
            bad, ok = self.unlaunched()
            out["packages"] = list(self.packages)
            out["unlaunched"] = [k.where for k in bad]
            out["justified"] = {k.where: k.reason for k in ok}
        return out

    def lines(self) -> list[str]:
        rows = [(k, t, a, str(c["launches"]), str(len(c["tests"]))) for (k, t, a), c in sorted(self.cells.items())]
        head = ("kernel", "launched types | fp8", "arch", "launches", "tests")
        out: list[str] = []
        if rows:
            w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
            out.append("  ".join(h.ljust(x) for h, x in zip(head, w, strict=True)).rstrip())
            out.append("  ".join("-" * x for x in w))
            out.extend("  ".join(c.ljust(x) for c, x in zip(r, w, strict=True)).rstrip() for r in rows)
        else:
            out.append("no kernel launches captured (the map needs launch capture: the interpreter lane with "
                       "--harness-compile-launches)")
        if self.packages:
            bad, ok = self.unlaunched()
            out.append(f"@triton.jit kernels of {', '.join(self.packages)} that no test launched: "
                       f"{len(bad)}" + (f" (and {len(ok)} justified in place)" if ok else ""))
            out.extend(f"  {k.where}" for k in bad)
            out.extend(f"  {k.where}: justified: {k.reason}" for k in ok)
        return out


@dataclass(frozen=True)
class Kernel:
    """A ``@triton.jit`` entry point found in a package's source."""

    name: str  # module.qualname, as launch capture names it
    file: str
    line: int
    reason: str | None  # the in-place justification, if any

    @property
    def where(self) -> str:
        return f"{self.name} ({self.file}:{self.line})"


def _is_jit(dec: ast.expr) -> bool:
    node = dec.func if isinstance(dec, ast.Call) else dec
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name == "jit"


def package_dir(package: str) -> Path:
    """The directory of ``package`` (found, not imported: a top-level package's modules are not run)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError) as e:
        raise ValueError(f"--harness-coverage: package {package!r} cannot be found: {e}") from None
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"--harness-coverage: package {package!r} is not importable (expected a directory with "
                         f"__init__.py on sys.path)")
    return Path(next(iter(spec.submodule_search_locations)))


def kernels_of(package: str) -> list[Kernel]:
    """The jit entry points of ``package`` and its subpackages, by reading their source."""
    root = package_dir(package)
    found: list[tuple[str, str, int, str | None, ast.FunctionDef]] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        module = ".".join([package, *parts])
        text = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(text, filename=str(path))
        except SyntaxError:
            continue
        lines = text.splitlines()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any(_is_jit(d) for d in node.decorator_list):
                top = min([d.lineno for d in node.decorator_list] + [node.lineno])
                reason = None
                for ln in (node.lineno, top - 1):
                    m = JUSTIFY.search(lines[ln - 1]) if 0 < ln <= len(lines) else None
                    if m:
                        reason = m.group(1).strip()
                found.append((f"{module}.{node.name}", os.path.relpath(path), node.lineno, reason, node))
    names = {n for n, *_ in found}
    short = {n.rsplit(".", 1)[1] for n in names}
    called: set[str] = set()
    for *_, node in found:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                f = sub.func
                nm = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if nm in short and nm != node.name:
                    called.add(nm)
    return [Kernel(n, f, ln, r) for n, f, ln, r, node in found if node.name not in called]
