"""The interpreter sees the same source positions the compiled kernel's facts carry: a multiply, add or
reduction executed by the Triton interpreter is found at the key :mod:`harness.lowering.compiled` gives it."""

from __future__ import annotations

import pytest

from harness.lowering import sites
from harness.lowering.compiled import facts_from_asm

pytestmark = [pytest.mark.interp_only, pytest.mark.filterwarnings("ignore:harness. interpreter op fma_contraction")]
triton = pytest.importorskip("triton")
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
