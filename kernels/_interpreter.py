"""Whether a kernel runs on the Triton interpreter: what a launcher asks before it switches on an
interpreter-only workaround (explicit FP8/bf16 rounding, CPU tensors).

Why the kernel object and not ``TRITON_INTERPRET``: ``@triton.jit`` decides once, when the kernel's module is
imported, by Triton's own reading of the variable. The variable read again at launch can disagree (set or
cleared after the import, or spelled ``false``, which a looser reading takes for true), and a workaround
would then run on a GPU, or be missing on the interpreter. The kernels do not import ``harness`` (they are
the code under test); the harness's own question, "does this session interpret?", is
``harness.arch.interpreting()``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["runs_on_interpreter"]


def runs_on_interpreter(kernel: Any) -> bool:
    """``True`` when ``kernel`` (a ``@triton.jit`` object) was decorated for the interpreter."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover - every supported triton has it
        return False
    return isinstance(kernel, InterpretedFunction)
