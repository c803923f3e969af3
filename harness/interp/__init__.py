"""pytest glue of the interpreter shims: on the interpreter lane, make Triton's interpreter compute what the
GPU computes for the length of the session.

Each shim is a module beside this one:

- :mod:`harness.interp.casts`: FP8 conversions as the assumed arch's lowering;
- :mod:`harness.interp.arith`: bf16 arithmetic, reductions, atomics and conversions as the GPU computes them,
  and one warning per kernel and op for what no shim covers;
- :mod:`harness.interp.approx_math`: fp32 ``/`` and the ``tl.math`` approximations as the H200 computes them;
- :mod:`harness.interp.dots`: ``tl.dot`` as the assumed arch's tensor cores compute it
  (:mod:`harness.tensor_cores`);
- :mod:`harness.interp.scaled_dots`: ``tl.dot_scaled`` likewise (:func:`harness.tensor_cores.dot_scaled`), its
  scales decoded per their type; provided on Triton 3.6, whose interpreter has none;
- :mod:`harness.interp.jit`: the fix for the interpreter's leaked language patch, which would break later AOT
  compiles, and for Triton 3.6's scalar ``__index__`` under NumPy 2.

They are installed when the session is configured and removed, innermost first, when it ends, so a pytester
session nested in a test leaves the outer session's patches as they were.
"""

from __future__ import annotations

import pytest

from harness.interp.jit import fix_interpreter_leak, fix_scalar_index, unfix_interpreter_leak, unfix_scalar_index
from harness.plugin import session_of


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness", "low-precision kernel harness")
    group.addoption(
        "--harness-interp-casts", dest="harness_interp_casts", choices=("gpu", "off"), default="gpu",
        help="interpreter lane: gpu (default) makes its FP8 casts those of --harness-arch (a CUDA arch; else "
             "sm90), refusing what that compiler refuses; off: the interpreter's own casts",
    )
    group.addoption(
        "--harness-interp-arith", dest="harness_interp_arith", choices=("gpu", "off"), default="gpu",
        help="interpreter lane: gpu (default) makes bf16 arithmetic, reductions, atomics and conversions the "
             "GPU's and warns once per kernel and op about ops known to differ; off: the interpreter's own",
    )


@pytest.hookimpl(trylast=True)  # after harness.plugin chose the lane and the arch
def pytest_configure(config: pytest.Config) -> None:
    s = session_of(config)
    if s.lane != "interp":
        return
    from harness.interp import arith, casts  # here, not at the top: they import torch and triton

    if config.getoption("harness_interp_casts", default="gpu") == "gpu":
        handle = casts.install(casts.target_for(s.arch))
        s.on_close(lambda: casts.uninstall(handle))
    else:  # the interpreter's own casts, even inside a session that installed them (pytester)
        cm = casts.suspended()
        cm.__enter__()
        s.on_close(lambda: cm.__exit__(None, None, None))
    if config.getoption("harness_interp_arith", default="gpu") == "gpu":
        arith_handle = arith.install(casts.target_for(s.arch))
        s.on_close(lambda: arith.uninstall(arith_handle))
    from harness.interp import approx_math  # fp32 `/` and tl.math as the GPU approximates them

    if approx_math.applies_to(s.arch):
        math_handle = approx_math.install()
        s.on_close(lambda: approx_math.uninstall(math_handle))
    from harness.interp import dots  # tl.dot as the tensor cores of the assumed arch compute it

    dots_handle = dots.install(casts.target_for(s.arch))
    s.on_close(lambda: dots.uninstall(dots_handle))
    from harness.interp import scaled_dots  # tl.dot_scaled too (after arith, whose warning wrapper it replaces)

    scaled_handle = scaled_dots.install(casts.target_for(s.arch))
    s.on_close(lambda: scaled_dots.uninstall(scaled_handle))


def pytest_sessionstart(session: pytest.Session) -> None:
    # Before any test module runs an interpreted kernel; undone at the end (an outer session's fix, in a
    # pytester run, gives a None handle: that session removes it).
    s = session_of(session.config)
    if s.lane != "interp":
        return
    handle = fix_interpreter_leak()
    s.on_close(lambda: unfix_interpreter_leak(handle))
    index_handle = fix_scalar_index()  # Triton 3.6: range() over a runtime int under NumPy 2
    s.on_close(lambda: unfix_scalar_index(index_handle))
