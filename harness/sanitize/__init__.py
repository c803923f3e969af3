"""Memory safety of every interpreted launch (the CPU lane's sanitizer, ``--harness-sanitize``).

Why: a low-precision kernel can compute the right numbers and still read past a tensor when a length is not a
multiple of the block, or have two programs store the same bytes. On the GPU the first is a silent read of
whatever lies there (or a fault), the second a result that depends on scheduling; neither shows in the numbers
of one run. The interpreter lane already runs every kernel with real CPU addresses, so every access can be
checked against the storages the launch was given, every store against the other programs' stores, and a byte a
program stores twice against the threads the compiled kernel stores it from.

- :mod:`harness.sanitize.memory`: the launch's storages and the vectorised bounds check;
- :mod:`harness.sanitize.races`: the launch's stores, byte by byte, which two programs overlap, and which bytes
  one program stores again;
- :mod:`harness.sanitize.report`: the findings, their messages, the session's collection of them;
- :mod:`harness.sanitize.launch`: the hooks in Triton's interpreter (installed through the session's patch);
- :mod:`harness.sanitize.plugin`: the pytest glue (option, marker, terminal section).

Nothing in the package imports pytest; Triton and torch only once :func:`install` runs.
"""

from __future__ import annotations

from harness.sanitize.launch import install
from harness.sanitize.report import SECTION, Finding, SanitizerError, SanitizerWarning, State

__all__ = ["SECTION", "Finding", "SanitizerError", "SanitizerWarning", "State", "install"]
