"""--harness-autotune=first (the default on the interpreter lane) runs the autotuner's first config after its own
pruning (``prune_configs_by``), and only that one: the output says which config ran."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

pytestmark = pytest.mark.interp_only

CONFIGS = [triton.Config({"V": 1}), triton.Config({"V": 2}), triton.Config({"V": 3})]


def _drop_first(configs, nargs, **kwargs):
    return [c for c in configs if c.kwargs["V"] != 1]


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def _which(out_ptr, n, V: tl.constexpr):
    tl.store(out_ptr, tl.load(out_ptr) * 10 + V)


@triton.autotune(configs=CONFIGS, key=["n"], prune_configs_by={"early_config_prune": _drop_first})
@triton.jit
def _which_pruned(out_ptr, n, V: tl.constexpr):
    tl.store(out_ptr, tl.load(out_ptr) * 10 + V)


@pytest.mark.parametrize(("kernel", "ran"), [(_which, 1), (_which_pruned, 2)], ids=["plain", "pruned"])
def test_first_config_after_pruning_runs_once(kernel, ran):
    out = torch.zeros(1, dtype=torch.int32)
    kernel[(1,)](out, 1)
    assert int(out) == ran  # one run (a second would leave two digits), of the first config left by pruning
