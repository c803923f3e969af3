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


def test_key_of_a_mutated_module_hashes_the_mutant_not_the_file_beneath(tmp_path, monkeypatch):
    """A mutation child loads the mutated text under the real file name: an outcome cached for the unmutated file
    must not answer for the mutant (a mutant only a compile refuses would survive)."""
    import linecache
    import types

    from harness.mutate import hook

    path = tmp_path / "k.py"
    path.write_text("A = 1\n")
    launch = Launch("k.k", str(path), (("x_ptr", "*fp16"),), (("BLOCK", 64),), ())
    monkeypatch.setattr(dc, "_SRC_HASH", {})
    monkeypatch.setattr(hook, "_LOADED", {})
    plain = dc.cache_key(launch, "sm90")
    monkeypatch.setattr(dc, "_SRC_HASH", {})
    try:
        hook._Loader(str(path), "A = 2\n", "").exec_module(types.ModuleType("k"))
    finally:
        linecache.cache.pop(str(path), None)
    assert dc.cache_key(launch, "sm90") != plain
    assert path.read_text() == "A = 1\n"
