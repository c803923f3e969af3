"""The source text of ``@triton.jit`` kernels built by ``exec`` (no file), kept where Triton's compiler can read it.

Why: Triton's own tests make kernel variants by editing a template's source and ``exec``-ing it under the
interpreter (test_core's ``patch_kernel``). The interpreter runs such a kernel, but a compile of it (launch
capture, the lowering shim's facts) rebuilds a ``JITFunction``, which reads the source through
``inspect.getsourcelines`` and refuses a function from ``<string>`` ("@jit functions should be defined in a Python
file"): capture listed them ``not captured``, and the lowering shim kept the interpreter's order for them.

How: while the shims are installed, ``InterpretedFunction.__init__`` (the ``@triton.jit`` of an interpreted
kernel) of a function whose code has no file looks at the frame that called ``exec`` for a string that compiles
to exactly the code being executed (code objects compare by their bytecode, constants, names and line table);
only such a string is kept. :func:`with_file` then writes it to the compile cache (``exec/<sha256>.py``, one
file per text) and gives the function with that file as its code's file name: its line numbers are the text's
own, so every location Triton or the harness reports points into it. The kernel's globals stay the defining
module's (a fresh process, which imports the file, does not have them: see :mod:`harness.compile.disk_cache`).

Public API: :data:`TAG`, :func:`install`, :func:`source_of`, :func:`with_file`.
"""

from __future__ import annotations
import __future__

import hashlib
import os
import sys
import threading
import types
from pathlib import Path
from typing import Any

from harness.interp.patch import Patch, installed

__all__ = ["TAG", "install", "source_of", "with_file"]

#: The tag of this module's wrapper in the patch layer (:mod:`harness.interp.patch`).
TAG = "exec-source"

_FUTURE_FLAGS = 0
for _name in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _name).compiler_flag

_lock = threading.Lock()
_SOURCES: dict[types.CodeType, str] = {}  # a kernel's code -> the text it was compiled from
_FILES: dict[str, str] = {}  # sha256 of a text -> the file it was written to


def _fileless(code: types.CodeType) -> bool:
    return code.co_filename.startswith("<")


def remember(fn: Any, depth: int = 2) -> None:
    """Keep the source text of ``fn`` if it was defined by ``exec`` of a string that some frame above holds."""
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType) or not _fileless(code) or code in _SOURCES:
        return
    frame = sys._getframe(depth)
    while frame is not None and frame.f_code.co_filename != code.co_filename:
        frame = frame.f_back  # up to the exec'd module body that defines fn
    if frame is None or code not in frame.f_code.co_consts or frame.f_back is None:
        return
    body, caller = frame.f_code, frame.f_back
    flags = caller.f_code.co_flags & _FUTURE_FLAGS  # exec inherits its caller's __future__ flags
    for value in list(caller.f_locals.values()):
        if not isinstance(value, str) or fn.__name__ not in value:
            continue
        try:
            compiled = compile(value, body.co_filename, "exec", flags=flags, dont_inherit=True)
        except (SyntaxError, ValueError):
            continue
        if compiled == body:
            with _lock:
                _SOURCES[code] = value
            return


def source_of(fn: Any) -> str | None:
    """The text ``fn`` was ``exec``-ed from, if it was kept; ``None`` otherwise."""
    code = getattr(fn, "__code__", None)
    return _SOURCES.get(code) if isinstance(code, types.CodeType) else None


def with_file(fn: Any) -> Any:
    """``fn`` itself if its code has a file or its text was not kept; else the same function (globals, defaults,
    closure, attributes) whose code names the file the text was written to. ``OSError`` if it cannot be
    written."""
    text = source_of(fn)
    if text is None:
        return fn
    path = _written(text)
    new = types.FunctionType(fn.__code__.replace(co_filename=path), fn.__globals__, fn.__name__, fn.__defaults__,
                             fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__annotations__ = fn.__annotations__
    new.__dict__.update(fn.__dict__)
    new.__qualname__, new.__module__, new.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
    return new


def _written(text: str) -> str:
    from harness.compile.disk_cache import cache_dir  # only for an exec-built kernel that is compiled

    sha = hashlib.sha256(text.encode()).hexdigest()
    with _lock:
        hit = _FILES.get(sha)
        if hit is not None and os.path.exists(hit):
            return hit
        d = cache_dir() / "exec"
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"{sha[:32]}.py"
        if not (path.exists() and path.read_text(encoding="utf-8") == text):
            tmp = Path(f"{path}.tmp{os.getpid()}")
            try:
                tmp.write_text(text, encoding="utf-8")
                os.replace(tmp, path)
            finally:
                if tmp.exists():
                    tmp.unlink()
        _FILES[sha] = str(path)
        return str(path)


def install(patch: Patch) -> None:
    """Wrap ``InterpretedFunction.__init__``, through ``patch``, to :func:`remember` kernels built by ``exec``."""
    from triton.runtime import interpreter as itp  # the shims are installed once Triton is imported

    cls = itp.InterpretedFunction
    if installed(cls, "__init__", TAG):
        return
    orig = cls.__init__

    def __init__(self: Any, fn: Any, *args: Any, **kwargs: Any) -> None:
        orig(self, fn, *args, **kwargs)
        try:
            remember(fn)
        except Exception:  # noqa: BLE001 - a kernel the interpreter runs never fails over this
            pass

    patch.setattr(cls, "__init__", __init__, tag=TAG)
