"""Every interpreter shim at once, as the plugin installs them on the interpreter lane: for a script or benchmark
that runs kernels on the interpreter outside pytest and must compute what the session computes."""

from __future__ import annotations

from typing import Any

from harness.arch import Arch, parse_arch
from harness.interp.patch import Patch

__all__ = ["install", "missing_methods"]


def missing_methods(itp: Any, need: dict[str, tuple[str, ...]]) -> str | None:
    """What this Triton's interpreter module ``itp`` lacks of the classes and methods a shim wraps (``need``:
    class name -> method names), or ``None``: a shim that does not recognize the interpreter patches nothing."""
    for cls, names in need.items():
        c = getattr(itp, cls, None)
        if c is None:
            return f"no triton.runtime.interpreter.{cls}"
        missing = [n for n in names if not callable(getattr(c, n, None))]
        if missing:
            return f"{cls} lacks {missing}"
    return None


def install(patch: Patch, arch: Arch | str | None, *, casts: bool = True, arith: bool = True,
            lowering: bool = True) -> None:
    """Install, through ``patch``, the shims of a session judged as ``arch`` (``None``: sm90): FP8 casts (or,
    with ``casts=False``, the interpreter's own even under an outer session's), bf16 arithmetic and the
    warnings of what differs (``arith``), approximate fp32 math, ``tl.dot`` and ``tl.dot_scaled``; the
    interpreter fixes of :mod:`harness.interp.jit`, the skip of its discarded overflow check
    (:mod:`harness.interp.overflow_check`), and its scan for builtins answered from memory
    (:mod:`harness.interp.builtin_scan`), as is its storage type per scalar type (:mod:`harness.interp.np_dtype`);
    last, with ``arith`` and ``lowering``, fp contraction, reductions and scans as the target's compiled kernel
    computes them (:mod:`harness.interp.lowering`, on top of the others)."""
    from harness.interp import (
        approx_math,
        builtin_scan,
        differences,
        dots,
        exec_source,
        jit,
        libdevice,
        np_dtype,
        overflow_check,
        scaled_dots,
    )
    from harness.interp import arith as arith_shim
    from harness.interp import casts as casts_shim
    from harness.interp import lowering as lowering_shim

    target = casts_shim.target_for(arch)
    if casts:
        casts_shim.install(patch, target)
    else:
        patch.lift(casts_shim.TAG, tag="interp-casts-off")
    if arith:
        differences.install(patch)
        arith_shim.install(patch, target)
    if approx_math.applies_to(target if arch is None else parse_arch(arch)):
        approx_math.install(patch)
    builtin_scan.install(patch)  # before libdevice, which scans through what it finds installed
    np_dtype.install(patch)  # the interpreter's storage type per scalar type, from memory
    libdevice.install(patch)  # libdevice calls as compiled: the CUDA module, its symbols run as tl.math ops
    dots.install(patch, target)
    scaled_dots.install(patch, target)
    jit.fix_core_builtins(patch)  # tl.core.sub(..., sanitize_overflow=False) in a helper
    jit.fix_interpreter_leak(patch)
    exec_source.install(patch)  # kernels built by exec (test_core's patch_kernel): compiled from their text
    jit.fix_scalar_index(patch)  # Triton 3.6: range() over a runtime int under NumPy 2
    jit.fix_float_args(patch)  # a float argument is an fp32 scalar, as compiled (Liger's eps.to(tl.float32))
    jit.fix_dtype_value(patch)  # a helper's dtype argument has .value, as compiled (FlagGems' get_dtype_min)
    overflow_check.install(patch)  # the int overflow check the interpreter computes and discards: skipped
    if arith and lowering and lowering_shim.applies_to(parse_arch(arch) if arch is not None else target):
        lowering_shim.install(patch, target)
