"""The interpreter shims: on the interpreter lane, make Triton's interpreter compute what the GPU computes for the
length of the session.

Each shim is a module beside this one:

- :mod:`harness.interp.casts`: FP8 conversions as the assumed arch's lowering;
- :mod:`harness.interp.arith`: bf16 arithmetic, reductions, atomics and conversions as the GPU computes them;
- :mod:`harness.interp.differences`: what no shim covers, as data, and one warning per kernel and op for it;
- :mod:`harness.interp.approx_math`: fp32 ``/`` and the ``tl.math`` approximations as the H200 computes them;
- :mod:`harness.interp.dots`: ``tl.dot`` as the assumed arch's tensor cores compute it
  (:mod:`harness.tensor_cores`);
- :mod:`harness.interp.scaled_dots`: ``tl.dot_scaled`` likewise (:func:`harness.tensor_cores.dot_scaled`), its
  scales decoded per their type; provided on Triton 3.6, whose interpreter has none;
- :mod:`harness.interp.lowering`: fp contraction, reductions and scans in the order of the launch's compiled kernel
  (:mod:`harness.lowering`), installed last, on top of the others;
- :mod:`harness.interp.jit`: the fix for the interpreter's leaked language patch, which would break later AOT
  compiles, for Triton 3.6's scalar ``__index__`` under NumPy 2, for ``tl.core`` builtins a helper calls, and
  for ``triton.language`` imported before the lane was chosen.

Every shim installs through :mod:`harness.interp.patch`, the one undo layer, and reports what it cannot model
through :mod:`harness.interp.differences`. The pytest glue is :mod:`harness.interp.plugin`: it installs them into
the session's layer when the session is configured, and the session undoes the layer, innermost first, when it
ends, so a pytester session nested in a test leaves the outer session's patches as they were. Nothing in this
package imports pytest.
"""
