"""Two checkouts of one kernel file in one process: each op is placed in its own checkout's file."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from harness.lowering import compiled

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
    x = torch.randn(ROWS, N)
    for k in (a, b):
        k.row_sum[(1,)](x, torch.empty(ROWS), N=N, num_warps=4)
    assert [w[0] for w in seen] == [a.__file__, b.__file__]
