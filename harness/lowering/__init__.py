"""What the compiled kernel computes around the arithmetic: fp contraction and the order of reductions and scans.

Why: the interpreter evaluates ``a * b + c`` with two roundings and ``tl.sum`` / ``tl.cumsum`` in numpy's order,
while the GPU evaluates what Triton's compiler made of them: LLVM's NVPTX backend contracts ``fmul`` + ``fadd``
into one ``fma`` (fp fusion, on by default through Triton 3.9), and a reduction or scan combines elements in the
order its TTGIR layout and Triton's lowering (``ReduceOpToLLVM.cpp``, ``ScanOpToLLVM.cpp``) dictate. Both are
visible in the compiled kernel for the target (TTGIR, LLVM IR, PTX with source locations), so each launch's facts
are read from there, per Triton version and ``num_warps``, and evaluated here in numpy, one rounding per GPU
instruction.

The modules, one concern each (all import without triton, torch or pytest; only :mod:`.compiled` compiles,
:mod:`.stores` through it):

- :mod:`.ttgir`: the reduce / scan ops of a TTGIR module, their layouts and source positions;
- :mod:`.layout`: a TTGIR layout as the bases that place elements along one axis in registers, lanes, warps;
- :mod:`.reduce_order`: the order a reduction combines in, per Triton version, and its numpy evaluator;
- :mod:`.scan_order`: the same for scans;
- :mod:`.fma`: which multiply / add pairs the compiled kernel fused, and one-rounding fma in fp32 / bf16 / fp16;
- :mod:`.compiled`: the compiled kernel of a launch and the facts above, cached in memory and on disk;
- :mod:`.sites`: the source position of the op the interpreter is executing;
- :mod:`.stores`: which thread stores each element of a ``tl.store``, and whether a barrier orders two stores (for
  the sanitizer's check of one program's threads, :mod:`harness.sanitize`);
- :mod:`.numeric`: one GPU rounding per add / mul / fma / max / min in fp32, bf16 (uint16 bits) and fp16.

How an interpreter shim uses it (per launch, then per op):

1. ``facts = compiled.lowering_for(fn, signature, constexprs, num_warps=W, arch="sm90", fp_fusion=...)``; when
   ``facts.error`` is set, say so once and keep the interpreter's behaviour;
2. at a ``create_fmul`` / ``create_fadd`` / ``create_fsub`` / ``ReduceOps.apply_impl`` / ``ScanOps.apply_impl``,
   ``where = sites.interpreter_position()`` is the op's key, matched against ``facts.fused[i].mul`` / ``.add`` and
   ``facts.reductions[i].where`` / ``facts.scans[i].where``;
3. a matched reduction runs ``reduce_order.reduce(values, axis, ReducePlan(r.bits, rule_for(facts.triton)), kind,
   dtype, factors=...)``, a scan ``scan_order.scan(x, axis, scan_order.plan(s.bits), kind, dtype)``, a fused add
   ``numeric.fma(a, b, c, dtype)`` (the product's factors carried from the matched multiply);
4. ``facts.ptxas_lines`` are lines whose rounding ptxas chose; ``facts.quotient_lines`` and ``facts.carried``
   (a loop's multiply contracted into the next iteration's add, per place in ptxas's unrolled block:
   ``fma.unrolled_position(i, trip, c.unroll)`` with ``sites.loop_iteration()``) are modelled, the rest
   (``facts.unmodelled_ptxas_lines()``): warn there.
"""
