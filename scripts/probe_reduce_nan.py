"""What Triton emits for tl.max / argmax / argmin on sm90 (no GPU): the facts behind harness.interp.arith's all-NaN
rule. For each block size and num_warps it prints the layout and the combine's compare/select/shuffle
instructions in order; read them as: every setp is false over NaN, so each selp keeps its second operand, and
thread 0 (the storing one, ``setp.eq.b32 %p, %tid, 0``) pairs its element with higher-indexed ones only.

    python scripts/probe_reduce_nan.py 16,1024 1,4
"""

import re
import sys

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def argmax_kernel(x_ptr, v_ptr, i_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    v, i = tl.max(x, axis=0, return_indices=True)
    tl.store(v_ptr, v)
    tl.store(i_ptr, i)


@triton.jit
def argmin_kernel(x_ptr, v_ptr, i_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    v, i = tl.min(x, axis=0, return_indices=True)
    tl.store(v_ptr, v)
    tl.store(i_ptr, i)


@triton.jit
def max_kernel(x_ptr, v_ptr, i_ptr, BLOCK: tl.constexpr):
    tl.store(v_ptr, tl.max(tl.load(x_ptr + tl.arange(0, BLOCK)), axis=0))


_KEEP = re.compile(r"^\s*(@%p\d+ )?(setp|selp|shfl|max|min|st\.shared|ld\.shared|bar|st\.global)")


def main() -> None:
    blocks = [int(b) for b in (sys.argv[1] if len(sys.argv) > 1 else "16,1024").split(",")]
    warps = [int(w) for w in (sys.argv[2] if len(sys.argv) > 2 else "1,4").split(",")]
    sig = {"x_ptr": "*fp32", "v_ptr": "*fp32", "i_ptr": "*i32", "BLOCK": "constexpr"}
    print(f"Triton {triton.__version__}, sm90")
    for fn in (max_kernel, argmax_kernel, argmin_kernel):
        for block in blocks:
            for nw in warps:
                k = triton.compile(ASTSource(fn, sig, constexprs={"BLOCK": block}),
                                   target=GPUTarget("cuda", 90, 32), options={"num_warps": nw})
                layout = re.search(r"#blocked = (.*)", k.asm["ttgir"])
                print(f"\n== {fn.__name__} BLOCK={block} num_warps={nw}: {layout.group(1) if layout else '?'}")
                for line in k.asm["ptx"].splitlines():
                    if _KEEP.match(line):
                        print("   ", line.strip())


if __name__ == "__main__":
    main()
