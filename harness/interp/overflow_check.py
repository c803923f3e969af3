"""Interpreter speed shim: the integer-overflow check Triton's interpreter builds and then throws away, skipped.

Why: every ``+``, ``-`` and ``*`` of 32-bit (or narrower) integers in an interpreted kernel goes through
``TritonSemantic.binary_op_sanitize_overflow_impl``, because the interpreter's options say
``sanitize_overflow=True``. That method casts both operands to int64, redoes the operation, builds two
constants, two comparisons and an ``and``: nine more interpreted ops, each through the semantic layer's type
checks and broadcasts. Its only output is the ``device_assert`` at the end, and ``device_assert`` returns at once
unless ``options.debug`` is set, which the interpreter's options never are (``InterpreterOptions.debug`` is
``False`` and nothing sets it, Triton 3.6 and 3.9). The check is dead work: 7% of the kernel tests' CPU time
(353.5 against 328.0 user-s without it, Triton 3.9, 2026-12-07; ``benchmarks/bench_interp_overflow.py``).

The shim returns early in exactly that case: the builder is the interpreter's and its options have no
``debug``. With ``debug`` on (a future Triton that honours it), or for the compiler's builder, the original
runs. It is installed only when Triton's source still reads as described (the early return in
``device_assert``, the check ending in it), so a Triton that changes either keeps its own path.
"""

from __future__ import annotations

from typing import Any

from harness.interp.patch import Patch, installed, parameters, source_has

__all__ = ["TAG", "install"]

#: The tag of this shim's record in the patch layer (:mod:`harness.interp.patch`).
TAG = "overflow_check"


def install(patch: Patch) -> bool:
    """Install the early return through ``patch``.

    ``False`` when nothing was patched: it is in place (an outer session's), or this Triton's interpreter or
    semantic layer does not read as the module docstring says (left alone)."""
    try:
        from triton.language.semantic import TritonSemantic
        from triton.runtime import interpreter as itp
    except ImportError:
        return False
    builder_cls = getattr(itp, "InterpreterBuilder", None)
    options_cls = getattr(itp, "InterpreterOptions", None)
    orig = getattr(TritonSemantic, "binary_op_sanitize_overflow_impl", None)
    assert_impl = getattr(TritonSemantic, "device_assert", None)
    if builder_cls is None or options_cls is None or orig is None or assert_impl is None:
        return False
    if installed(TritonSemantic, "binary_op_sanitize_overflow_impl", TAG):
        return False
    if getattr(options_cls(), "debug", True) is not False:
        return False
    if parameters(orig) != ["self", "lhs", "rhs", "binary_op"]:
        return False
    # the check's one effect is the device_assert it ends in, which returns at once without debug
    if not source_has(orig, "self.device_assert(") or not source_has(assert_impl, "if not self.builder.options.debug"):
        return False

    def binary_op_sanitize_overflow_impl(self: Any, lhs: Any, rhs: Any, binary_op: Any) -> Any:
        if isinstance(self.builder, builder_cls) and not self.builder.options.debug:
            return None
        return orig(self, lhs, rhs, binary_op)

    binary_op_sanitize_overflow_impl.__wrapped__ = orig  # type: ignore[attr-defined]
    patch.setattr(TritonSemantic, "binary_op_sanitize_overflow_impl", binary_op_sanitize_overflow_impl, tag=TAG)
    return True
