"""Checks shared by every file the harness writes (reports, golden bookkeeping, changes lists).

Why one place: each output is checked before a run starts, so that a typo costs a usage error then rather than the
output at the end; the parent-directory rule is the same for all of them.
"""

from __future__ import annotations

import os

__all__ = ["parent_problem"]


def parent_problem(path: str | os.PathLike[str]) -> str:
    """Why no file can be created at ``path`` for want of its directory (empty when one can)."""
    parent = os.path.dirname(os.path.abspath(os.fspath(path)))
    if not os.path.isdir(parent):
        return f"{parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{parent} is not writable"
    return ""
