"""Bit-for-bit comparison of a function's outputs, and the text that reports the first difference.

Why bits: graph replay, determinism and batch invariance ask whether two runs wrote the *same* result, not a
close one; a NaN payload or the sign of a zero that changes between runs is a difference too (torch's
``equal`` would call two NaN unequal, ``assert_close(equal_nan=True)`` any two NaN equal). Each tensor is
viewed as the integer type of its element size and compared as integers.

Outputs are a function's return value (a tensor, or a tuple/list/dict of them, nested) flattened to named
tensors: ``return``, ``return[0]``, ``return['k']``; buffers a function writes in place carry their argument
name. The checks (:mod:`harness.replay.graph`, :mod:`harness.replay.invariance`) build a :class:`Difference`
and raise the text of :func:`format_difference` once, at their public boundary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.text import fmt_index

__all__ = ["POISON_NOTE", "Difference", "Report", "as_bits", "check_tensor", "compare", "compare_all", "flatten",
           "format_difference", "poison"]

_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}

#: FP8 formats whose only NaN is 0x80 (all-ones bytes are a number there).
_FNUZ = tuple(getattr(torch, n) for n in ("float8_e4m3fnuz", "float8_e5m2fnuz") if hasattr(torch, n))

POISON_NOTE = ("every output was filled with 0xFF bytes before the replay (a NaN in every IEEE float format, "
               "e4m3fn and e5m2 included; 0x80 in the fnuz FP8 formats; -1 or the maximum in integers)")


def check_tensor(t: Any, where: str, expected: str = "a tensor or a tuple/list/dict of tensors") -> torch.Tensor:
    """``t`` if its bits can be read and compared (a dense, non-complex tensor with data), else a TypeError that
    says ``where`` it came from: every argument and output of the replay checks goes through here."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{where} is a {type(t).__name__}; expected {expected}")
    if t.is_meta or t.layout != torch.strided:
        raise TypeError(f"{where} is a {'meta' if t.is_meta else str(t.layout)} tensor; expected a dense tensor "
                        "with data")
    if t.is_complex():
        raise TypeError(f"{where} has complex dtype {t.dtype}; compare its torch.view_as_real() instead")
    return t


def flatten(value: Any, root: str, who: str) -> list[tuple[str, torch.Tensor]]:
    """``value`` (what ``who`` returned) as (name, tensor) pairs in a fixed order; ``TypeError`` naming ``who`` and
    the place for a leaf that is not a dense real tensor, or for ``None`` / an empty container (nothing to
    compare)."""
    out: list[tuple[str, torch.Tensor]] = []

    def walk(v: Any, name: str) -> None:
        if isinstance(v, Mapping):
            for k, sub in v.items():
                walk(sub, f"{name}[{k!r}]")
        elif isinstance(v, (tuple, list)):
            for i, sub in enumerate(v):
                walk(sub, f"{name}[{i}]")
        else:
            out.append((name, check_tensor(v, f"{who} returned {name}, which")))

    if value is None:
        raise TypeError(f"{who} returned None; expected a tensor or a tuple/list/dict of tensors")
    walk(value, root)
    if not out:
        raise TypeError(f"{who} returned no tensor; expected a tensor or a tuple/list/dict of tensors")
    return out


def as_bits(t: torch.Tensor) -> torch.Tensor:
    """``t`` viewed as the signed integer type of its element size (bool as uint8): any strides, no copy."""
    if t.dtype == torch.bool:
        return t.view(torch.uint8)
    return t.view(_INT_OF_SIZE[t.element_size()])


def poison(t: torch.Tensor) -> None:
    """Fill ``t`` with the poison pattern (see :data:`POISON_NOTE`), in place."""
    b = as_bits(t)
    if t.dtype in _FNUZ:
        b.fill_(0x80)
    else:
        b.fill_(0xFF if b.dtype == torch.uint8 else -1)


def _poison_word(t: torch.Tensor) -> int:
    return 0x80 if t.dtype in _FNUZ else (1 << (8 * t.element_size())) - 1


def _word(t: torch.Tensor, index: tuple[int, ...]) -> int:
    return int(as_bits(t)[index]) & ((1 << (8 * t.element_size())) - 1)


def _show(t: torch.Tensor, index: tuple[int, ...]) -> str:
    """``0x3f800000 (1)``: the element's bits, then its value."""
    word = _word(t, index)
    v = t[index]
    if t.is_floating_point():  # enough digits to tell any two float32 apart; float64 in full
        value = repr(float(v)) if t.element_size() == 8 else f"{float(v):.9g}"
    else:
        value = str(int(v))
    return f"0x{word:0{2 * t.element_size()}x} ({value})"


@dataclass
class Difference:
    """The first output in which two runs differ, as data (what :func:`format_difference` shows)."""

    name: str
    k: int  # elements that differ
    n: int
    index: tuple[int, ...]  # the first (lowest flat index) that differs
    left: str  # "0x... (value)" of the reference run
    right: str
    poisoned: bool = False  # the right-hand run holds the poison pattern there
    shapes: tuple[Any, Any] | None = None  # the outputs cannot be compared: (left, right) shape/dtype


def compare(name: str, left: torch.Tensor, right: torch.Tensor) -> Difference | None:
    """The first difference of ``right`` from ``left`` (same shape and dtype, else a Difference that says so),
    ``None`` when they are the same bits."""
    if left.shape != right.shape or left.dtype != right.dtype:
        return Difference(name, 0, 0, (), "", "",
                          shapes=((tuple(left.shape), left.dtype), (tuple(right.shape), right.dtype)))
    lb, rb = as_bits(left), as_bits(right.to(left.device))
    ne = lb != rb
    k = int(ne.sum())
    if k == 0:
        return None
    flat = int(ne.reshape(-1).nonzero()[0, 0])
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(left.shape)))
    poisoned = _word(right, index) == _poison_word(right)
    return Difference(name, k, left.numel(), index, _show(left, index), _show(right.to(left.device), index),
                      poisoned=poisoned)


def compare_all(left: Sequence[tuple[str, torch.Tensor]],
                right: Sequence[tuple[str, torch.Tensor]]) -> list[Difference]:
    """Every output's difference, in order; outputs of other names or counts are a difference of their own."""
    if [n for n, _ in left] != [n for n, _ in right]:
        return [Difference("outputs", 0, 0, (), "", "", shapes=([n for n, _ in left], [n for n, _ in right]))]
    return [d for (n, a), (_, b) in zip(left, right, strict=True) if (d := compare(n, a, b)) is not None]


@dataclass
class Report:
    """A failed check: its header, what was compared against what, the differences, and the rule."""

    header: str
    left: str  # label of the reference run ("eager", "run 1", "whole batch")
    right: str  # label of the run that differs
    differences: list[Difference]
    where: str = ""  # which run / rows differ, one line
    notes: list[str] = field(default_factory=list)
    rule: str = ""


def _difference_lines(r: Report, d: Difference) -> list[str]:
    if d.shapes is not None:
        a, b = d.shapes
        return [f"Output {d.name!r}: {r.left} gave {a}, {r.right} gave {b}; they cannot be compared bit for bit"]
    pct = 100.0 * d.k / d.n if d.n else 0.0
    lines = [f"Output {d.name!r}: mismatched elements: {d.k} / {d.n} ({pct:.1f}%)",
             f"First difference at index {fmt_index(d.index)}: {r.left} has {d.left}, {r.right} has {d.right}"]
    if d.poisoned:
        lines.append(f"The {r.right} left poison there: it never wrote this element")
    return lines


def format_difference(r: Report) -> str:
    """The failure text: header, where, the first differing output in full, the others in a line each."""
    lines = [r.header]
    if r.where:
        lines.append(r.where)
    first, *rest = r.differences
    lines += _difference_lines(r, first)
    for d in rest:
        what = f"{d.k} / {d.n} elements differ" if d.shapes is None else "shape or dtype differs"
        lines.append(f"Also differs: output {d.name!r} ({what})")
    lines += r.notes
    if r.rule:
        lines.append(f"Rule: {r.rule}")
    return "\n".join(lines)
