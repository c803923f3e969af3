"""The interpreter sees the same source positions the compiled kernel's facts carry: a multiply, add or
reduction executed by the Triton interpreter is found at the key :mod:`harness.lowering.compiled` gives it."""

from __future__ import annotations

import pytest

from harness.lowering import sites
from harness.lowering.compiled import facts_from_asm

pytestmark = [pytest.mark.interp_only, pytest.mark.filterwarnings("ignore:harness. interpreter op fma_contraction")]
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")
torch = pytest.importorskip("torch")


def test_interpreter_positions_match_compiled_keys(monkeypatch):
    from triton.runtime import interpreter as itp

    from harness.compile.matrix import compile_matrix
    from tests.lowering import kernels as k

    seen: dict[str, set] = {"fmul": set(), "fadd": set(), "reduce": set()}

    def spy(kind, orig):
        def wrapper(*args, **kwargs):
            pos = sites.interpreter_position()
            if pos is not None:
                seen[kind].add(pos)
            return orig(*args, **kwargs)
        return wrapper

    B = itp.InterpreterBuilder
    monkeypatch.setattr(B, "create_fmul", spy("fmul", B.create_fmul))
    monkeypatch.setattr(B, "create_fadd", spy("fadd", B.create_fadd))
    monkeypatch.setattr(itp.ReduceOps, "apply_impl", spy("reduce", itp.ReduceOps.apply_impl))
    x = torch.randn(4, 256)
    k.layernorm[(4,)](x, torch.randn(256), torch.randn(256), torch.empty_like(x), 256, 1e-5, BLOCK_N=256)
    sig = {"x_ptr": "*fp32", "w_ptr": "*fp32", "b_ptr": "*fp32", "y_ptr": "*fp32", "N": "i32", "eps": "fp32"}
    res = compile_matrix(k.layernorm, signature=sig, constexprs={"BLOCK_N": 256}, targets=["sm90"],
                         options={"num_warps": 4})["sm90"]
    facts = facts_from_asm(res.asm, ".".join(triton.__version__.split(".")[:2]), "sm90", 4, source=k.__file__)
    assert {r.where for r in facts.reductions} <= seen["reduce"]
    assert len(facts.reductions) == 2
    for f in facts.fused:
        assert f.mul in seen["fmul"]
        assert f.add in seen["fadd"] | seen["reduce"]


@triton.jit
def _row_stats(x):
    # a reduction and a scan inside a @jit helper: the compiled kernel's location of each is a callsite chain
    # (this line, called from the kernel's line); the interpreter runs them at this line
    s = tl.sum(x * x, axis=-1, keep_dims=True)
    return s, tl.cumsum(x, axis=1)


@triton.jit
def _stats_by_helper(x_ptr, s_ptr, c_ptr, N: tl.constexpr):
    rows = tl.arange(0, 4)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :])
    s, c = _row_stats(x)
    tl.store(s_ptr + rows[:, None], s)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], c)


@triton.jit
def _stats_inline(x_ptr, s_ptr, c_ptr, N: tl.constexpr):
    rows = tl.arange(0, 4)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :])
    s = tl.sum(x * x, axis=-1, keep_dims=True)
    c = tl.cumsum(x, axis=1)
    tl.store(s_ptr + rows[:, None], s)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], c)


def test_a_reduction_inside_a_helper_is_found_at_the_helpers_line(monkeypatch, recwarn):
    """The compiled facts key a helper's ``tl.sum`` / ``tl.cumsum`` by the helper's line (where the interpreter
    runs it), not by the kernel's line that called the helper: so it is computed in the compiled order, as the
    same ops written in the kernel are (the QSA cache kernels' RMS norm, in a helper, fell back to numpy's order)."""
    from triton.runtime import interpreter as itp

    from harness.compile.matrix import compile_matrix

    seen: set = set()
    for cls in (itp.ReduceOps, itp.ScanOps):
        real = cls.apply_impl

        def spy(self, *a, _real=real, **kw):
            pos = sites.interpreter_position()
            if pos is not None:
                seen.add(pos)
            return _real(self, *a, **kw)

        monkeypatch.setattr(cls, "apply_impl", spy)
    g = torch.Generator().manual_seed(38)
    x = torch.randn(4, 512, generator=g) * torch.logspace(-3, 3, 512)
    out = {}
    for kern in (_stats_by_helper, _stats_inline):
        s, c = torch.empty(4, 1), torch.empty_like(x)
        kern[(1,)](x, s, c, N=512, num_warps=4)
        out[kern.__name__] = (s, c)
    sig = {"x_ptr": "*fp32", "s_ptr": "*fp32", "c_ptr": "*fp32"}
    res = compile_matrix(_stats_by_helper, signature=sig, constexprs={"N": 512}, targets=["sm90"],
                         options={"num_warps": 4})["sm90"]
    facts = facts_from_asm(res.asm, ".".join(triton.__version__.split(".")[:2]), "sm90", 4, source=__file__)
    import inspect

    src, first = inspect.getsourcelines(_row_stats.fn)
    helper_lines = {first + i for i, text in enumerate(src) if "tl.sum(" in text or "tl.cumsum(" in text}
    assert len(facts.reductions) == 1 and len(facts.scans) == 1
    assert {r.where[1] for r in facts.reductions} | {s.where[1] for s in facts.scans} == helper_lines
    assert {r.where for r in facts.reductions} | {s.where for s in facts.scans} <= seen
    assert not [str(w.message) for w in recwarn.list if "is not what the GPU computes" in str(w.message)]
    hs, hc = out["_stats_by_helper"]
    ins, inc = out["_stats_inline"]
    assert torch.equal(hs, ins) and torch.equal(hc, inc)


def test_interpreted_codes_read_entries_added_later_and_a_dict_read_anew(monkeypatch):
    """The code objects of interpreted functions are read as Triton adds them (one more a generated kernel),
    and again from the start where the dict shrank (someone cleared it): a code missed is a kernel whose ops the
    shims cannot place."""
    from triton.runtime.interpreter import InterpretedFunction

    # five code objects (code objects compare by content, line numbers included)
    orig_a, new_a, orig_b, orig_c, new_c = (eval(f"lambda: {i}") for i in range(5))
    fns: dict = {}
    monkeypatch.setattr(InterpretedFunction, "rewritten_fn", fns)
    monkeypatch.setattr(sites, "_SEEN", [0])
    monkeypatch.setattr(sites, "_CODES", {})
    fns[orig_a] = new_a
    assert sites._interpreted_codes() == {new_a.__code__: True}
    fns[orig_b] = orig_b  # a function Triton could not rewrite runs as it is
    assert sites._interpreted_codes() == {new_a.__code__: True, orig_b.__code__: False}
    fns.clear()
    fns[orig_c] = new_c
    assert sites._interpreted_codes()[new_c.__code__] is True
