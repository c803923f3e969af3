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


_HELPERS = """
import triton
import triton.language as tl

@triton.jit
def scale(x):
    return x * {factor}

@triton.jit
def unused(x):
    return x
"""

_KERNEL = """
import triton
import triton.language as tl
import dk_helpers
from dk_helpers import scale

@triton.jit
def twice_scaled(x):
    return dk_helpers.scale(x)

@triton.jit
def kernel(x_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(x_ptr + o, twice_scaled(tl.load(x_ptr + o)))

@triton.jit
def direct(x_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(x_ptr + o, scale(tl.load(x_ptr + o)))

@triton.jit
def alone(x_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(x_ptr + o, tl.load(x_ptr + o) + 1)
"""


def test_key_holds_the_source_of_helpers_imported_from_another_module(tmp_path, monkeypatch):
    """Editing a helper the kernel imports (directly or as ``module.helper``) must not leave a stale outcome:
    a helper's edit can make the kernel fail or stop failing to compile."""
    import importlib
    import sys

    (tmp_path / "dk_helpers.py").write_text(_HELPERS.format(factor=2))
    (tmp_path / "dk_kernel.py").write_text(_KERNEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("dk_helpers", "dk_kernel"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    mod = importlib.import_module("dk_kernel")
    helpers = (str(tmp_path / "dk_helpers.py"),)
    # through a helper of its own module that calls ``dk_helpers.scale``; by the imported name; none
    assert (dc.helper_files(mod.kernel), dc.helper_files(mod.direct), dc.helper_files(mod.alone)) == (helpers,
                                                                                                      helpers, ())
    launch = Launch("dk_kernel.kernel", str(tmp_path / "dk_kernel.py"), (("x_ptr", "*fp32"),), (("BLOCK", 64),), (),
                    mod.kernel)
    monkeypatch.setattr(dc, "_SRC_HASH", {})
    before = dc.cache_key(launch, "sm90")
    (tmp_path / "dk_helpers.py").write_text(_HELPERS.format(factor=3))
    monkeypatch.setattr(dc, "_SRC_HASH", {})
    assert dc.cache_key(launch, "sm90") != before
    (tmp_path / "dk_helpers.py").write_text(_HELPERS.format(factor=2))
    monkeypatch.setattr(dc, "_SRC_HASH", {})
    assert dc.cache_key(launch, "sm90") == before
