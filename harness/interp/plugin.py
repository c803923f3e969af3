"""pytest glue of the interpreter shims (:mod:`harness.interp`): their options, and their install into the
session's patch layer on the interpreter lane."""

from __future__ import annotations

import pytest

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
    from harness.interp import shims  # here, not at the top: the shims import torch and triton

    shims.install(s.patch, s.arch, casts=config.getoption("harness_interp_casts", default="gpu") == "gpu",
                  arith=config.getoption("harness_interp_arith", default="gpu") == "gpu")
