"""Where a statement of a test kernels file is, so a report location pinned by a test follows edits of the file."""

from __future__ import annotations


def line_of(path: str, fn_name: str, text: str) -> int:
    """The line of the first line holding ``text`` in the body of ``fn_name`` in ``path``."""
    lines = open(path, encoding="utf-8").read().splitlines()
    start = next(i for i, s in enumerate(lines) if s.startswith(f"def {fn_name}("))
    return next(i for i in range(start, len(lines)) if text in lines[i]) + 1
