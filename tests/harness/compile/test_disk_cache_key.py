"""The on-disk compile cache's key holds everything that changes the compile: a cached outcome of another Triton or
other compile options (num_warps, num_stages) must not answer for this one."""

from __future__ import annotations

import pytest

from harness.compile import disk_cache as dc
from harness.compile.launches import Launch

pytestmark = pytest.mark.lane_independent


def _launch(**options: int) -> Launch:
    return Launch("m.k", __file__, (("x_ptr", "*fp16"),), (("BLOCK", 64),), tuple(sorted(options.items())))


def test_key_changes_with_the_triton_version_and_the_options(monkeypatch):
    base = dc.cache_key(_launch(num_warps=4), "sm90")
    assert dc.cache_key(_launch(num_warps=4), "sm90") == base  # deterministic
    assert dc.cache_key(_launch(num_warps=8), "sm90") != base
    assert dc.cache_key(_launch(num_warps=4, num_stages=2), "sm90") != base
    assert dc.cache_key(_launch(num_warps=4), "sm80") != base
    monkeypatch.setattr(dc, "triton_version", lambda: "0.0.0-other")
    assert dc.cache_key(_launch(num_warps=4), "sm90") != base
