"""pytest glue of the interpreter shims (:mod:`harness.interp`): their options, and their install into the
session's patch layer on the interpreter lane, once the project imports Triton (a run that never does imports
neither Triton nor torch)."""

from __future__ import annotations

import pytest

from harness.imports import after_import, flush
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
    group.addoption(
        "--harness-interp-lowering", dest="harness_interp_lowering", choices=("gpu", "off"), default="gpu",
        help="interpreter lane, with --harness-interp-arith=gpu: gpu (default) computes fp contraction, reductions "
             "and scans in the order of each launch's kernel compiled for the arch (one compile per launch "
             "configuration, cached on disk); off: the interpreter's order, warned",
    )


@pytest.hookimpl(trylast=True)  # after harness.plugin chose the lane and the arch
def pytest_configure(config: pytest.Config) -> None:
    s = session_of(config)
    if s.lane != "interp":
        return
    casts = config.getoption("harness_interp_casts", default="gpu") == "gpu"
    arith = config.getoption("harness_interp_arith", default="gpu") == "gpu"
    lowering = config.getoption("harness_interp_lowering", default="gpu") == "gpu"

    def install() -> None:  # the shims import torch and triton: only once the project imports triton
        from harness.interp import shims

        shims.install(s.patch, s.arch, casts=casts, arith=arith, lowering=lowering)

    after_import(s.patch, "triton", install, tag="shims-on-import")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config) -> None:
    flush()  # a test module whose first Triton import came through a harness module: install now


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    flush()  # a conftest or fixture that imported Triton the same way
