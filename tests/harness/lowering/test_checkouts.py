"""Lowering and store facts are cached by the kernel's content, not its path: another checkout of the same file
(CI clones to a new directory every run, a renamed copy) reads them from a warm cache, with every position moved
to its own files, so the interpreter shim and the race check apply them there without compiling."""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from harness.interp import lowering as shim
from harness.lowering import compiled, reduce_order, stores

pytestmark = pytest.mark.interp_only
triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")

ROWS, N = 8, 1024

ROW_SUM = '''import triton
import triton.language as tl


@triton.jit
def row_sum(x_ptr, y_ptr, N: tl.constexpr):
    row = tl.program_id(0)
    x = tl.load(x_ptr + row * N + tl.arange(0, N))
    tl.store(y_ptr + row, tl.sum(x, axis=0))
'''

HELPER = '''import triton
import triton.language as tl


@triton.jit
def total(x):
    # the reduction sits here, in another module than the kernel's
    return tl.sum(x, axis=0)
'''

BY_HELPER = '''import triton
import triton.language as tl

from .h import total


@triton.jit
def row_sum(x_ptr, y_ptr, N: tl.constexpr):
    row = tl.program_id(0)
    x = tl.load(x_ptr + row * N + tl.arange(0, N))
    tl.store(y_ptr + row, total(x))
'''


def _package(root: Path, name: str, files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, ModuleType]:
    """``files`` written as the package ``name`` under ``root`` and imported (in order), gone from
    ``sys.modules`` after the test."""
    pkg = root / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    out = {}
    for mod, path, search in [(name, pkg / "__init__.py", [str(pkg)])] + [
            (f"{name}.{f}", pkg / f"{f}.py", None) for f in files]:
        if path.name != "__init__.py":
            path.write_text(files[path.stem])
        spec = importlib.util.spec_from_file_location(mod, path, submodule_search_locations=search)
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, mod, module)
        spec.loader.exec_module(module)
        out[mod.rsplit(".", 1)[-1]] = module
    return out


@pytest.fixture
def compiles(tmp_path, monkeypatch) -> list[str]:
    """A cold cache directory and memory; the kernels (by file) the lowering and store facts compile from then on."""
    from harness.compile import matrix

    monkeypatch.setenv("HARNESS_COMPILE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(compiled, "_MEMO", {})
    seen: list[str] = []
    real = matrix.compile_matrix

    def spy(fn, **kwargs):
        seen.append(getattr(fn, "fn", fn).__code__.co_filename)
        return real(fn, **kwargs)

    monkeypatch.setattr(matrix, "compile_matrix", spy)
    return seen


def _run(fn, x: torch.Tensor, *, plain: bool = False) -> tuple[torch.Tensor, list[str]]:
    """``fn`` launched on ``x``'s rows: the sums and the harness warnings it gave. ``plain``: the interpreter's
    own order."""
    y = torch.empty(ROWS)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        if plain:
            with shim.suspended():
                fn[(ROWS,)](x, y, N=N, num_warps=4)
        else:
            fn[(ROWS,)](x, y, N=N, num_warps=4)
    return y, [str(w.message) for w in seen if "harness" in str(w.message)]


def _facts(fn, x: torch.Tensor, kind: str = "lowering"):
    spec = compiled.specialize(fn, (x, torch.empty(ROWS)), {"N": N, "num_warps": 4})
    get = compiled.lowering_for if kind == "lowering" else stores.stores_for
    facts = get(fn, spec.signature, spec.constexprs, num_warps=spec.num_warps, fp_fusion=spec.fp_fusion,
                divisible=spec.divisible, options=spec.options)
    assert not facts.error, facts.error
    return facts


def _rows() -> torch.Tensor:
    g = torch.Generator().manual_seed(43)
    return torch.randn(ROWS, N, generator=g) * torch.logspace(-3, 3, N)


@pytest.mark.parametrize("name", ["k", "renamed"])
def test_another_checkout_of_the_kernel_reads_the_facts_without_compiling(tmp_path, monkeypatch, compiles, name):
    """``name``: the copy's file name (a checkout where the kernel file has another name)."""
    a = _package(tmp_path / "a", "ckey_a", {"k": ROW_SUM}, monkeypatch)["k"]
    b = _package(tmp_path / "b", "ckey_b", {name: ROW_SUM}, monkeypatch)[name]
    x = _rows()
    ya, _ = _run(a.row_sum, x)
    _facts(a.row_sum, x, "stores")
    assert compiles and set(compiles) == {a.__file__}
    compiles.clear()
    yb, warned = _run(b.row_sum, x)
    lowering, store_facts = _facts(b.row_sum, x), _facts(b.row_sum, x, "stores")
    assert compiles == []
    assert not warned, warned
    where = [r.where for r in lowering.reductions] + [s.where for s in store_facts.sites]
    assert len(where) == 2 and {w[0] for w in where} == {b.__file__}
    # this process holds both checkouts: each has its own positions
    assert {r.where[0] for r in _facts(a.row_sum, x).reductions} == {a.__file__}
    assert {s.where[0] for s in _facts(a.row_sum, x, "stores").sites} == {a.__file__}
    (r,) = lowering.reductions
    plan = reduce_order.ReducePlan(r.bits, reduce_order.rule_for(triton.__version__))
    (want,) = reduce_order.reduce(x.numpy(), 1, plan, "add", "fp32")
    np.testing.assert_array_equal(yb.numpy(), want)
    np.testing.assert_array_equal(yb.numpy(), ya.numpy())
    plain, _ = _run(b.row_sum, x, plain=True)
    assert (yb != plain).any(), "the inputs must be ones where the compiled order changes a sum"


def test_a_helper_in_another_module_moves_to_the_copied_helper(tmp_path, monkeypatch, compiles):
    a = _package(tmp_path / "a", "ckey_ha", {"h": HELPER, "k": BY_HELPER}, monkeypatch)
    b = _package(tmp_path / "b", "ckey_hb", {"h": HELPER, "k": BY_HELPER}, monkeypatch)
    x = _rows()
    ya, _ = _run(a["k"].row_sum, x)
    compiles.clear()
    yb, warned = _run(b["k"].row_sum, x)
    (r,) = _facts(b["k"].row_sum, x).reductions
    assert compiles == []
    assert not warned, warned
    line = 1 + HELPER.splitlines().index("    return tl.sum(x, axis=0)")
    assert r.where[:2] == (b["h"].__file__, line)
    np.testing.assert_array_equal(yb.numpy(), ya.numpy())
    plain, _ = _run(b["k"].row_sum, x, plain=True)
    assert (yb != plain).any(), "the inputs must be ones where the compiled order changes a sum"


def test_an_edited_kernel_misses_the_cache(tmp_path, monkeypatch, compiles):
    a = _package(tmp_path / "a", "ckey_ea", {"k": ROW_SUM}, monkeypatch)["k"]
    edited = ROW_SUM.replace("tl.sum(x, axis=0)", "tl.max(x, axis=0)")
    c = _package(tmp_path / "c", "ckey_ec", {"k": edited}, monkeypatch)["k"]
    x = _rows()
    assert [r.kind for r in _facts(a.row_sum, x).reductions] == ["add"]
    compiles.clear()
    assert [r.kind for r in _facts(c.row_sum, x).reductions] == ["max"]
    assert compiles == [c.__file__]


def test_the_interpreter_places_each_checkouts_op_in_its_own_file(tmp_path, monkeypatch, compiles):
    """Two checkouts run code objects that compare equal (CPython leaves the file out of code equality): each op's
    position must still name the file its frame runs."""
    from triton.runtime import interpreter as itp

    from harness.lowering import sites

    seen: list[tuple[str, int, int] | None] = []
    real = itp.ReduceOps.apply_impl

    def spy(self, *args, **kwargs):
        seen.append(sites.interpreter_position())
        return real(self, *args, **kwargs)

    monkeypatch.setattr(itp.ReduceOps, "apply_impl", spy)
    a = _package(tmp_path / "a", "ckey_pa", {"k": ROW_SUM}, monkeypatch)["k"]
    b = _package(tmp_path / "b", "ckey_pb", {"k": ROW_SUM}, monkeypatch)["k"]
    x = _rows()
    for k in (a, b):
        k.row_sum[(1,)](x, torch.empty(ROWS), N=N, num_warps=4)
    assert [w[0] for w in seen] == [a.__file__, b.__file__]


def test_a_cached_compile_failure_names_this_checkouts_file(tmp_path, monkeypatch, compiles):
    """The stored reason a kernel has no facts ("does not compile (... k.py:9:5: error ...)") is read by another
    checkout with its own path in it: a warning must not send a user to a file of another directory."""
    from harness.compile import matrix

    def failing(fn, **kwargs):
        path = getattr(fn, "fn", fn).__code__.co_filename
        compiles.append(path)
        return {kwargs["targets"][0]: RuntimeError(f"{path}:9:5: error: a verifier failure")}

    monkeypatch.setattr(matrix, "compile_matrix", failing)
    a = _package(tmp_path / "a", "cerr_a", {"k": ROW_SUM}, monkeypatch)["k"]
    b = _package(tmp_path / "b", "cerr_b", {"k": ROW_SUM}, monkeypatch)["k"]
    x = _rows()
    spec = compiled.specialize(a.row_sum, (x, torch.empty(ROWS)), {"N": N, "num_warps": 4})

    def facts(fn):
        return compiled.lowering_for(fn, spec.signature, spec.constexprs, num_warps=spec.num_warps,
                                     fp_fusion=spec.fp_fusion, divisible=spec.divisible, options=spec.options)

    assert f"{a.__file__}:9:5: error" in facts(a.row_sum).error
    assert compiles == [a.__file__]
    error = facts(b.row_sum).error
    assert compiles == [a.__file__], "b's facts must come from the cache"
    assert f"{b.__file__}:9:5: error" in error and a.__file__ not in error, error
