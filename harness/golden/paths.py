"""The paths the golden options and commands take, checked before anything runs.

Why a module of its own: a bad path given to ``--golden-changes``, ``--golden-record``, ini ``golden_dir`` or a
``python -m harness golden`` command cost a traceback after the whole run (a directory, a missing parent), a hang (a
FIFO), a file overwritten through a symlink, or goldens written and temp files deleted outside the project. Asked at
start-up, each costs a usage error naming the option. The pytest plugin and the commands ask the same questions
here; the checks every output shares are :mod:`harness.paths`.

Pure: no torch, no pytest.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from harness.paths import kind_of, parent_problem

__all__ = ["golden_root", "output_problem"]


def output_problem(path: str | os.PathLike[str], *, replace_flag: str | None = None) -> str:
    """Why a JSON file cannot be written at ``path`` (empty when it can). ``replace_flag``: the option that lets
    an existing file be replaced; given, an existing file is refused unless that option is (None: replaced).

    A symlink is refused whatever it points to: replacing it would lose the link, writing through it would
    land wherever it leads, and neither is what a path option asks for."""
    p = os.fspath(path)
    if not p:
        return "an empty path; expected the path of a file to write, such as out.json"
    if os.path.islink(p):
        return f"is a symlink (-> {os.readlink(p)}); a link is never followed: give the path of a regular file"
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except OSError as e:
        return f"cannot be examined ({e.strerror or e})"
    if st is not None and not stat.S_ISREG(st.st_mode):
        return f"exists and is not a regular file ({kind_of(st.st_mode)}); expected a file path such as out.json"
    if st is not None and replace_flag is not None:
        return f"the file exists; remove it or pass {replace_flag} to replace it"
    return parent_problem(p)


def golden_root(raw: str, rootdir: str | os.PathLike[str]) -> Path:
    """The golden dir that ``raw`` (ini ``golden_dir``, or a record's) names, made absolute against ``rootdir``;
    a ValueError unless it lies inside ``rootdir``.

    Why refuse: goldens belong to the project (docs/goldens.md); a golden dir outside it would have a regen run
    write there and every session sweep the temp files it finds there. The path is judged as written: a golden
    dir that is itself a symlink fails each check instead, naming the link (:mod:`harness.golden.files`), and
    the sweep never walks it (:func:`harness.golden.unused.leftover_temps`)."""
    top = Path(os.path.abspath(rootdir))
    root = Path(os.path.normpath(top / raw))  # an absolute raw replaces top
    if os.path.commonpath([top, root]) != str(top):
        raise ValueError(f"{raw!r} is {root}, outside the rootdir {top}")
    return root
