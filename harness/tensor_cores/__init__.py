"""What the tensor cores compute for ``tl.dot`` (and ``tl.dot_scaled``): a public, tested reference model per
arch and operand format, so a CPU run can compute what an H200 computes, bit for bit.

Public API: :func:`dot`, :data:`MODELS`, :class:`BlockFMA`, :func:`model_for`, :func:`fp8_model` (which FP8 dot
runs where), :class:`DotRefused`; :func:`dot_scaled`, :data:`LOWERINGS`, :class:`ScaledLowering`,
:func:`lowering_for`, :class:`DotScaledRefused`; :func:`error_bound`, :func:`scaled_error_bound`, :class:`ErrorBound`.

Modules: :mod:`.models` (the numerics as data, each row with its source), :mod:`.chain` (the evaluator of
``tl.dot``: block steps chained over k, and what Triton's lowering wraps around the instruction), :mod:`.scaled`
(``tl.dot_scaled``: Triton's upcast and scale multiply on sm80-sm90, then the ``tl.dot`` of :mod:`.chain`),
:mod:`.tcgen05` (sm100's ``tcgen05.mma``, plain and block-scaled: the published B200 model as rows and its
evaluator),
:mod:`.fast` (the same chain and FMA dot restructured for speed, bit for bit wherever its checked preconditions
hold; :mod:`.chain` tries it first), :mod:`.bounds` (the worst-case error of ``tl.dot`` against exact arithmetic,
derived from the rows).
"""

from __future__ import annotations

from harness.tensor_cores.bounds import ErrorBound, error_bound, scaled_error_bound
from harness.tensor_cores.chain import dot
from harness.tensor_cores.models import MODELS, BlockFMA, DotRefused, fp8_model, model_for
from harness.tensor_cores.scaled import LOWERINGS, DotScaledRefused, ScaledLowering, dot_scaled, lowering_for

__all__ = ["BlockFMA", "DotRefused", "DotScaledRefused", "ErrorBound", "LOWERINGS", "MODELS", "ScaledLowering", "dot",
           "dot_scaled", "error_bound", "fp8_model", "lowering_for", "model_for", "scaled_error_bound"]
