"""What a golden check does, as one pure table: (run mode, file state, captured on this arch?) -> outcome.

Why a table of its own: the workflow has 36 combinations, and the rules that matter most ("a missing
golden fails and nothing is created in CI", "a golden of another arch is never rewritten") must be
readable, and testable, in one place (``tests/harness/golden/test_golden_decide.py``), apart from file I/O
and pytest. Nothing here imports torch.

The run mode comes from the options (:func:`run_mode`). In CI (the ``CI`` variable set to anything but an
explicit false) the mode is always ``check``: ``--golden-regen``/``--golden-regen-all`` are refused with a
usage error, so a missing golden is ``fail-missing`` (the failure says it is never created in CI and
prints the command that creates it locally), and the fixture refuses any write as a last guard.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_BYTES", "ENV_MAX_BYTES", "FILE_STATES", "MODES", "OUTCOMES", "Decision", "ci_value",
           "decide", "max_bytes", "run_mode"]

MODES = ("check", "regen", "regen-all")
#: missing: no file; unreadable: a file that is corrupt, truncated or malformed; readable: a good golden;
#: refused: not a regular file inside the golden dir (symlink, directory, FIFO), never touched.
FILE_STATES = ("missing", "unreadable", "readable", "refused")
OUTCOMES = ("pass", "fail-missing", "fail-unreadable", "fail-refused", "fail-mismatch", "fail-foreign", "write",
            "write-review")


#: The environment variable that sets the size cap of a golden (bytes, a positive int).
ENV_MAX_BYTES = "HARNESS_GOLDEN_MAX_BYTES"
#: The cap's default: 256 MiB. The largest golden shipped inflates to 1 MiB; uncapped, an honest zip bomb of 0.5 MB
#: that inflates to 512 MiB takes 1.38 GB and 21 s to read (issue 44's survey).
DEFAULT_MAX_BYTES = 256 << 20


def max_bytes() -> int:
    """The most bytes one golden may take, on disk and inflated (its members together, so each one too):
    ``HARNESS_GOLDEN_MAX_BYTES`` if set, else :data:`DEFAULT_MAX_BYTES`. Why absolute: the reader's ratio guard
    (:mod:`harness.golden.files`) lets an honest, highly compressible file inflate a thousandfold. Here, beside
    the other environment reading (``CI``), so the plugin checks it at configure time without importing torch."""
    raw = os.environ.get(ENV_MAX_BYTES, "")
    if not raw:
        return DEFAULT_MAX_BYTES
    digits = raw.strip()
    # ASCII digits only: str.isdigit() is also true of '²', which int() refuses
    if not (digits.isascii() and digits.isdigit()) or int(digits) < 1:
        raise ValueError(f"{ENV_MAX_BYTES}={raw!r}: expected a positive int, the most bytes a golden may take")
    return int(digits)


def ci_value(environ: Mapping[str, str] | None = None) -> str | None:
    """The value of ``CI`` when it is set to anything but an explicit false (goldens are never written
    there), else None."""
    v = (environ if environ is not None else os.environ).get("CI", "")
    return None if v.strip().lower() in ("", "0", "false", "no", "off") else v


def run_mode(regen: bool, regen_all: bool, environ: Mapping[str, str] | None = None) -> str:
    """The run's mode from ``--golden-regen`` / ``--golden-regen-all``; a ValueError when one of them asks
    to write goldens in CI."""
    mode = "regen-all" if regen_all else ("regen" if regen else "check")
    ci = ci_value(environ)
    if mode != "check" and ci is not None:
        flag = "--golden-regen-all" if mode == "regen-all" else "--golden-regen"
        raise ValueError(
            f"{flag}: refusing to write golden files because the environment variable CI is set (CI={ci!r}); "
            f"goldens are captured on a developer machine (python -m harness golden regen) and committed"
        )
    return mode


@dataclass(frozen=True)
class Decision:
    """What one ``golden.check`` does: compare (``none``; ``tolerance``: the check's rule; ``content``:
    bits, dtype, shape, format, op, dtype case), then ``if_equal`` when nothing differs (or nothing was
    compared), else ``if_differs``. ``write`` writes and passes; ``write-review`` writes and the test fails
    at its end so the new golden is looked at; ``fail-foreign``: differs from a golden of another arch,
    which no run here rewrites."""

    compare: str
    if_equal: str
    if_differs: str


def decide(mode: str, state: str, same_arch: bool | None) -> Decision:
    """The whole golden workflow as a pure function of the run's mode, the file's state and whether the
    file was captured on this arch (None: unknown, the file names no arch).

    A golden of another arch (an H200's, on a CPU box) is compared and never replaced: regenerating here
    would swap the hardware's output for this lane's without anyone noticing. Deleting it first makes it
    missing, which a regen run creates (``harness.golden.message.recapture_command``)."""
    if mode not in MODES:
        raise ValueError(f"decide: mode must be one of {MODES}, got {mode!r}")
    if state not in FILE_STATES:
        raise ValueError(f"decide: state must be one of {FILE_STATES}, got {state!r}")
    if not (same_arch is None or same_arch is True or same_arch is False):  # 1 == True: compare identity
        raise ValueError(f"decide: same_arch must be True, False or None, got {same_arch!r}")
    if state in ("missing", "refused") and same_arch is not None:
        raise ValueError(f"decide: a {state} file names no arch, so same_arch must be None")
    if state == "readable" and same_arch is None:
        raise ValueError("decide: a readable golden names its arch, so same_arch must be True or False")
    if state == "refused":
        return Decision("none", "fail-refused", "fail-refused")
    if mode == "check":
        if state == "readable":
            return Decision("tolerance", "pass", "fail-mismatch")
        return Decision("none", f"fail-{state}", f"fail-{state}")
    if state == "readable":
        if same_arch is False:
            return Decision("tolerance", "pass", "fail-foreign")
        if mode == "regen":
            return Decision("tolerance", "pass", "write-review")
        return Decision("content", "pass", "write")
    if same_arch is False:  # an unreadable golden of another arch: repaired only there
        return Decision("none", "fail-foreign", "fail-foreign")
    write = "write" if mode == "regen-all" else "write-review"
    return Decision("none", write, write)
