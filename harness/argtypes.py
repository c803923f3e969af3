"""argparse argument types the subcommands share, so that a bad value reads the same in each: the argument's
name (argparse's) then what was expected and what came."""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["at_least", "at_least_one"]


def at_least(minimum: int, unit: str, units: str) -> Callable[[str], int]:
    """A type for a count of ``units`` (``unit`` in the singular): a whole number, at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number of {units}, got {text!r}") from None
        if n < minimum:
            raise argparse.ArgumentTypeError(f"expected at least {minimum} {unit if minimum == 1 else units}, "
                                             f"got {n}")
        return n

    return parse


def at_least_one(unit: str, units: str) -> Callable[[str], int]:
    """A type for a count of ``units``: a whole number, at least 1."""
    return at_least(1, unit, units)
