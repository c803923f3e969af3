"""Formatting primitives every failure text of the harness uses: numbers, indices, columns, a caller's msg.

Why shared: a value or an index must read the same in a comparison, a top-k and a golden failure. Only the
primitives are shared; each feature builds its own text beside its own check.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Msg", "check_msg", "columns", "fmt_index", "fmt_num", "fmt_sci", "with_msg"]

#: A caller's ``msg``: a str becomes the first line; a callable gets the text and returns the message.
Msg = str | Callable[[str], str] | None


def fmt_index(index: Sequence[int] | None) -> str:
    if index is None:
        return "-"
    return "(" + ", ".join(str(i) for i in index) + (",)" if len(index) == 1 else ")")


def fmt_num(v: float | None) -> str:
    """A value in a table: 6 significant digits, ``nan``/``inf`` as such, ``-`` for none."""
    if v is None:
        return "-"
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return str(v)
    return f"{v:.6g}"


def fmt_sci(v: float | None) -> str:
    """An error in a summary line: 4 significant digits in scientific notation."""
    return "-" if v is None else f"{v:.3e}" if math.isfinite(v) else str(v)


def columns(head: Sequence[str], body: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """``head`` and ``body`` right-aligned in columns as wide as their widest cell."""
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    return [indent + "  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [head, *body]]


def check_msg(msg: Any) -> Msg:
    """``msg`` if it is one (see :data:`Msg`): checked before comparing, since a ``msg`` of another type would be
    dropped silently and only be missed when the failure it was meant to explain shows without it."""
    if msg is not None and not isinstance(msg, str) and not callable(msg):
        raise TypeError(f"msg must be a str, a callable taking the failure text, or None, got {type(msg).__name__} "
                        f"{msg!r}")
    return msg


def with_msg(text: str, msg: Msg) -> str:
    """``text`` with the caller's ``msg``: a str goes first, a callable rewrites the whole text."""
    if callable(msg):
        return str(msg(text))
    if isinstance(msg, str) and msg:
        return f"{msg}\n{text}"
    return text

