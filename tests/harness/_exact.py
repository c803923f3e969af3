"""Exact-arithmetic oracles shared by the harness's tests.

The models under test round in float64 and repair; these oracles round exact rationals, so a test built on them
does not share the model's own shortcuts. Imported as ``tests.harness._exact`` (the project's ``pythonpath``
puts the repo root on ``sys.path``)."""

from fractions import Fraction

import numpy as np


def round_f32(x: Fraction) -> np.float32:
    """The fp32 nearest to the exact ``x``, ties to even, subnormals included (no overflow handling: callers stay
    in range). Brackets ``x`` by the float64-rounded value's fp32 neighbours, then picks by exact distance."""
    f = np.float32(float(x))
    cands = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    return min(cands, key=lambda c: (abs(Fraction(float(c)) - x), int(c.view(np.uint32)) & 1))
