"""argparse argument types the subcommands share, so that a bad value reads the same in each: the argument's
name (argparse's) then what was expected and what came."""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["at_least_one"]


def at_least_one(unit: str, units: str) -> Callable[[str], int]:
    """A type for a count of ``units`` (``unit`` in the singular): a whole number, at least 1."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number of {units}, got {text!r}") from None
        if n < 1:
            raise argparse.ArgumentTypeError(f"expected at least 1 {unit}, got {n}")
        return n

    return parse
