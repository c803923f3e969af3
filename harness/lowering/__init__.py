"""What the compiled kernel computes around the arithmetic: fp contraction and the order of reductions and scans.

Why: the interpreter evaluates ``a * b + c`` with two roundings and ``tl.sum`` / ``tl.cumsum`` in numpy's order,
while the GPU evaluates what Triton's compiler made of them: LLVM's NVPTX backend contracts ``fmul`` + ``fadd``
into one ``fma`` (fp fusion, on by default through Triton 3.9), and a reduction or scan combines elements in the
order its TTGIR layout and Triton's lowering (``ReduceOpToLLVM.cpp``, ``ScanOpToLLVM.cpp``) dictate. Both are
visible in the compiled kernel for the target (TTGIR, LLVM IR, PTX with source locations), so each launch's facts
are read from there, per Triton version and ``num_warps``, and evaluated here in numpy, one rounding per GPU
instruction.

The modules, one concern each (all import without triton, torch or pytest; only :mod:`.compiled` compiles):

- :mod:`.ttgir`: the reduce / scan ops of a TTGIR module, their layouts and source positions;
- :mod:`.layout`: a TTGIR layout as the bases that place elements along one axis in registers, lanes, warps;
- :mod:`.reduce_order`: the order a reduction combines in, per Triton version, and its numpy evaluator;
- :mod:`.scan_order`: the same for scans;
- :mod:`.fma`: which multiply / add pairs the compiled kernel fused, and one-rounding fma in fp32 / bf16 / fp16;
- :mod:`.compiled`: the compiled kernel of a launch and the facts above, cached in memory and on disk;
- :mod:`.sites`: the source position of the op the interpreter is executing;
- :mod:`.numeric`: one GPU rounding per add / mul / fma / max / min in fp32, bf16 (uint16 bits) and fp16.
"""
