"""How deep launch capture compiles by default (issue 40, cold capture <= 3x the plain suite): the launch as run
through ptxas on every target, its widened variants and branches through Triton's frontend only, once per class of
targets the frontend treats alike, and an autotuned kernel's later configs frontend-only. Each cut must keep what it
claims to keep: configs that change the code are each compiled, targets the frontend treats differently are each
compiled, the seed regression (bf16 keys cast to e4b15) is still found, and ``--harness-compile-depth=full``
compiles as before."""

from __future__ import annotations

import warnings

import pytest

# Imported before any in-process pytester run: pytester restores sys.modules afterwards, and a second import of
# triton's native extension in one process aborts.
import triton
import triton.compiler  # noqa: F401
import triton.language as tl

from harness.compile import disk_cache as dc
from harness.compile.cache import compile_frontend
from harness.compile.errors import error_kind, error_line
from harness.compile.findings import Report, check
from harness.compile.launches import Launch, launch_from_args
from harness.compile.matrix import compile_matrix
from harness.compile.targets import frontend_class, parse_target
from tests.harness.compile.reported import run_reported

pytestmark = [pytest.mark.lane_independent, pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")]


@triton.jit
def _seed_store(key_ptr, cache_ptr, n, FP8: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    k = tl.load(key_ptr + offs, mask=offs < n, other=0.0)
    tl.store(cache_ptr + offs, k.to(FP8).to(tl.uint8, bitcast=True), mask=offs < n)


@triton.jit
def _guarded(x_ptr, y_ptr, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK <= 64, "BLOCK must be at most 64")
    o = tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.load(x_ptr + o))


def _launch(fn, sig, consts=(), options=()) -> Launch:
    module = fn.fn.__module__
    return Launch(f"{module}.{fn.fn.__qualname__}", __file__, tuple(sig), tuple(consts), tuple(options), fn)


# --- frontend classes ---------------------------------------------------------------------------------------


def test_frontend_classes_split_where_the_backend_hands_the_frontend_something_else():
    cls = {t: frontend_class(parse_target(t)) for t in ("sm75", "sm80", "sm86", "sm89", "sm90", "sm100", "sm120")}
    # sm75 gets the sm70 FP8 helpers, sm89 adds e4nv, sm90 deprecates e4b15 dot operands: four classes
    assert len({cls["sm75"], cls["sm80"], cls["sm89"], cls["sm90"]}) == 4
    assert cls["sm86"] == cls["sm80"]
    assert cls["sm100"] == cls["sm120"] == cls["sm90"]
    assert frontend_class(parse_target("gfx942")) == "gfx942"  # not asked of a backend: a class of its own


def test_a_frontend_outcome_is_shared_by_a_class_and_not_across_classes(tmp_path):
    key = _launch(_seed_store, [("key_ptr", "*bf16"), ("cache_ptr", "*u8"), ("n", "i32")],
                  [("FP8", tl.float8e4nv), ("BLOCK", 64)])
    assert dc.cache_key(key, "sm80", frontend=True) == dc.cache_key(key, "sm86", frontend=True)
    assert dc.cache_key(key, "sm80", frontend=True) != dc.cache_key(key, "sm89", frontend=True)
    assert dc.cache_key(key, "sm80") != dc.cache_key(key, "sm86")  # a full compile stays per target
    first = dc.launch_outcome(key, "sm80", tmp_path, frontend=True)
    again = dc.launch_outcome(key, "sm86", tmp_path, frontend=True)
    other = dc.launch_outcome(key, "sm89", tmp_path, frontend=True)
    assert (first.ok, first.cached) == (False, False)  # e4nv is refused below sm89 by the frontend
    assert (again.ok, again.cached, again.line) == (False, True, first.line)
    assert (other.ok, other.cached) == (True, False)


# --- what the dedup key keeps apart -------------------------------------------------------------------------


def test_configs_differing_in_warps_or_stages_share_a_frontend_outcome_and_tiles_do_not():
    sig = [("x_ptr", "*fp16"), ("y_ptr", "*fp16")]
    a = _launch(_guarded, sig, [("BLOCK", 32)], [("num_stages", 2), ("num_warps", 4)])
    b = _launch(_guarded, sig, [("BLOCK", 32)], [("num_stages", 3), ("num_warps", 8)])
    c = _launch(_guarded, sig, [("BLOCK", 128)], [("num_stages", 2), ("num_warps", 4)])
    assert dc.cache_key(a, "sm90", frontend=True) == dc.cache_key(b, "sm90", frontend=True)
    assert dc.cache_key(a, "sm90") != dc.cache_key(b, "sm90")
    assert dc.cache_key(a, "sm90", frontend=True) != dc.cache_key(c, "sm90", frontend=True)


_AUTOTUNED = """
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 32}, num_warps=4), triton.Config({"BLOCK": 32}, num_warps=8),
                          triton.Config({"BLOCK": 32}, num_warps=8, num_stages=2),
                          triton.Config({"BLOCK": 128}, num_warps=4)], key=["n"])
@triton.jit
def copy_tiles(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK <= 64, "BLOCK must be at most 64")
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n), mask=o < n)
"""

_AUTOTUNED_TEST = """
import torch
import triton
from tiles import copy_tiles


def test_copy():
    x = torch.arange(64, dtype=torch.float16)
    y = torch.empty_like(x)
    copy_tiles[lambda meta: (triton.cdiv(64, meta["BLOCK"]),)](x, y, 64)
    assert torch.equal(x, y)
"""


def _run(pytester, monkeypatch, tmp_path, *args):
    monkeypatch.setenv("HARNESS_COMPILE_CACHE", str(tmp_path / "cache"))
    return run_reported(pytester, tmp_path, "-o", "harness_compile_launches=true", "--harness-targets=sm80,sm90",
                        *args)


def test_a_later_autotune_config_that_the_frontend_refuses_is_still_found(pytester, monkeypatch, tmp_path):
    pytester.makepyfile(tiles=_AUTOTUNED, test_tiles=_AUTOTUNED_TEST)
    result, rep = _run(pytester, monkeypatch, tmp_path)
    # the interpreter ran BLOCK=32; the last config's guard fails as launched: a finding, on the newest target's
    # frontend class (later configs are compiled for that class only)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*tiles.copy_tiles @ sm90: the launch as run fails to compile [[]guard[]]*",
                                 "*BLOCK must be at most 64*"])
    # the first config (BLOCK=32, 4 warps) through ptxas on both targets (2), its 6 variants (x_ptr, y_ptr, both in
    # bf16, fp32) in the frontend of each target's class (12); BLOCK=32 with 8 warps in sm90's frontend (1), which
    # the third config (8 warps, 2 stages) shares; BLOCK=128 in sm90's frontend (1)
    assert rep["compiles"] == 2 + 12 + 1 + 1


def test_depth_full_compiles_every_config_and_variant_through_ptxas(pytester, monkeypatch, tmp_path):
    pytester.makepyfile(tiles=_AUTOTUNED, test_tiles=_AUTOTUNED_TEST)
    result, rep = _run(pytester, monkeypatch, tmp_path, "--harness-compile-depth=full")
    result.assert_outcomes(failed=1)
    # three BLOCK=32 configs x (launch + 6 variants) x 2 targets; BLOCK=128 x 2 (its guard stops its variants)
    assert rep["compiles"] == 3 * 7 * 2 + 2


# --- what the frontend sees, and what it does not -----------------------------------------------------------


def test_the_frontend_alone_refuses_the_seed_regression_as_the_full_compile_does():
    sig = {"key_ptr": "*bf16", "cache_ptr": "*u8", "n": "i32"}
    consts = {"FP8": tl.float8e4b15, "BLOCK": 64}
    front = compile_matrix(_seed_store, signature=sig, constexprs=consts, targets=["sm80"], frontend=True)["sm80"]
    full = compile_matrix(_seed_store, signature=sig, constexprs=consts, targets=["sm80"])["sm80"]
    assert isinstance(front, Exception) and isinstance(full, Exception)
    assert (error_kind(front), error_line(front, _seed_store)) == (error_kind(full), error_line(full, _seed_store))
    assert "is_fp16() or arg.type.scalar.is_fp32()" in error_line(front, _seed_store)


def test_the_frontend_does_not_run_ptxas():
    # fp16 -> e5m2 for sm75: Triton 3.9 emits cvt.f16x2.f32, which ptxas refuses below sm80 (Triton 3.9's compiler
    # output on this machine); the frontend accepts the kernel. What depth=full alone sees.
    sig = {"key_ptr": "*fp16", "cache_ptr": "*u8", "n": "i32"}
    consts = {"FP8": tl.float8e5, "BLOCK": 64}
    front = compile_frontend(*_prepared(sig, consts), parse_target("sm75"))
    assert not isinstance(front, BaseException) and front.asm == {}


def _prepared(sig, consts):
    from harness.compile.signature import prepare

    return prepare(_seed_store, sig, consts)


def test_depth_is_checked():
    launch = launch_from_args(_guarded, (), {"x_ptr": _Tensor(), "y_ptr": _Tensor(), "BLOCK": 32})
    with pytest.raises(ValueError, match="depth='deep': expected one of fast, full, frontend"):
        check(launch, ["sm90"], depth="deep", report=Report())


class _Tensor:
    """What launch_from_args types a tensor by: a dtype and a data pointer."""

    def __init__(self) -> None:
        import torch

        self.dtype = torch.float16

    def data_ptr(self) -> int:
        return 0


# --- a refusal by the kernel's guard is read back from the disk cache ----------------------------------------


def test_a_guard_refusal_is_read_back_from_the_disk_cache(tmp_path):
    launch = _launch(_guarded, [("x_ptr", "*fp16"), ("y_ptr", "*fp16")], [("BLOCK", 128)])
    first = dc.launch_outcome(launch, "sm90", tmp_path)
    assert (first.ok, first.kind) == (False, "guard")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a damaged-entry warning would fail here
        again = dc.launch_outcome(launch, "sm90", tmp_path)
    assert (again.ok, again.kind, again.cached) == (False, "guard", True)
