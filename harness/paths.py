"""Checks shared by every file the harness writes or reads on a user's say (reports, golden bookkeeping, changes
lists, mutation and fuzz tables, shard reports).

Why one place: each path is checked before a run starts, so that a typo costs a usage error then rather than the
output at the end, and a FIFO is never opened (the open would block forever); the rules are the same for all.
"""

from __future__ import annotations

import os
import stat

__all__ = ["check_path", "input_problem", "kind_of", "own_file_problem", "parent_problem"]


def parent_problem(path: str | os.PathLike[str]) -> str:
    """Why no file can be created at ``path`` for want of its directory (empty when one can)."""
    parent = os.path.dirname(os.path.abspath(os.fspath(path)))
    if not os.path.isdir(parent):
        return f"{parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{parent} is not writable"
    return ""


def check_path(path: str | os.PathLike[str]) -> str:
    """Why a file cannot be written at ``path`` (empty when it can): not empty, no directory or other non-regular
    file there, a writable directory. A symlink to a regular file passes: writers that replace the file
    (``os.replace``) replace the link, never write through it."""
    p = os.fspath(path)
    if not p:
        return "an empty path"
    if os.path.isdir(p):
        return "is a directory; expected a file path such as report.json"
    if os.path.lexists(p) and not os.path.isfile(p):
        return "exists and is not a regular file"
    return parent_problem(p)


def own_file_problem(path: str | os.PathLike[str]) -> str:
    """:func:`check_path`, and a symlink refused whatever it points to: for outputs whose path a user names once for
    a run, where replacing the link would lose it and writing through it would land wherever it leads."""
    return check_path(path) or ("is a symbolic link; name a file of its own" if os.path.islink(path) else "")


def kind_of(mode: int) -> str:
    """What a non-regular file is, for a message: ``a directory``, ``a FIFO``, else ``not a regular file``."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    return "not a regular file"


def input_problem(path: str | os.PathLike[str]) -> str:
    """Why a file cannot be read at ``path`` (empty when it can): asked before opening, since opening a FIFO
    blocks until someone writes to it."""
    p = os.fspath(path)
    if not p:
        return "an empty path"
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return "not found"
    except OSError as e:
        return f"cannot be examined ({e.strerror or e})"
    if not stat.S_ISREG(st.st_mode):
        return f"is {kind_of(st.st_mode)}, not a regular file"
    return ""
