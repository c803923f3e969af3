"""Interpreter speed shim: the NumPy storage type of a Triton type, answered from memory.

Why: Triton's interpreter (3.6 and 3.9) asks ``_get_np_dtype`` for the storage of every value an op makes, and the
function builds its table of nineteen ``np.dtype`` objects on every call: about 17 µs a call, a tenth of a
QSA/turboquant kernel test's CPU time (cProfile, Triton 3.9, 2026-12-06, 417k calls). The answer depends only on
the scalar type, so :func:`install` replaces it (through the session's patch layer) by one that asks Triton's own
function once per scalar type and keeps what it said. Pointers, and blocks of pointers, are ``uint64`` as Triton
says; a type Triton has no storage for raises as Triton's does (nothing is kept for it).
"""

from __future__ import annotations

import threading
from typing import Any

from harness.interp.patch import Patch, installed, parameters, source_has

__all__ = ["TAG", "install"]

#: The tag of this shim's record in the patch layer (:mod:`harness.interp.patch`).
TAG = "np_dtype"


def install(patch: Patch) -> bool:
    """Make the interpreter's ``_get_np_dtype`` remember its answer per scalar type, through ``patch``.

    ``False`` when nothing was patched: it is in place (an outer session's), or this Triton's ``_get_np_dtype``
    looks different (left alone)."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter as itp
    except ImportError:  # pragma: no cover - every supported triton has it
        return False
    orig = getattr(itp, "_get_np_dtype", None)
    if orig is None or installed(itp, "_get_np_dtype", TAG) or parameters(orig) != ["tt_dtype"]:
        return False
    # the body this relies on: pointers first, then a block's element type, then a table lookup by scalar type
    if not source_has(orig, "isinstance(tt_dtype, tl.pointer_type)", "isinstance(tt_dtype, tl.block_type)",
                      "tt_dtype.element_ty", "np_types[tt_dtype]"):
        return False
    pointer, block = tl.pointer_type, tl.block_type
    memo: dict[Any, Any] = {}
    lock = threading.Lock()

    def _get_np_dtype(tt_dtype: Any) -> Any:
        scalar = tt_dtype.element_ty if isinstance(tt_dtype, block) else tt_dtype
        if isinstance(tt_dtype, pointer) or isinstance(scalar, pointer):
            return orig(tt_dtype)
        hit = memo.get(scalar)
        if hit is None:
            hit = orig(scalar)  # raises for a type without storage, as Triton does: nothing kept
            with lock:
                memo[scalar] = hit
        return hit

    patch.setattr(itp, "_get_np_dtype", _get_np_dtype, tag=TAG)
    return True
