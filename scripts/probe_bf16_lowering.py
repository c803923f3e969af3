"""Which PTX instructions Triton emits for bf16 element-wise ops, reductions, conversions and atomics per target
(no GPU): the facts harness.interp.arith models. Run it with each Triton to check (3.6 and 3.9 agree except
where the arith docstring says: cumsum promotes bf16 to fp32 on 3.6, and -x is 0 - x there).

    python scripts/probe_bf16_lowering.py 80,90 add,sub,mul,div,fma,muladd,max,min,neg,lt,sum,rmax,i2bf,atomic
"""

import re
import sys

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def binop(a_ptr, b_ptr, c_ptr, o_ptr, OP: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + i)
    b = tl.load(b_ptr + i)
    c = tl.load(c_ptr + i)
    r = a
    if OP == "add":
        r = a + b
    elif OP == "sub":
        r = a - b
    elif OP == "mul":
        r = a * b
    elif OP == "div":
        r = a / b
    elif OP == "fma":
        r = tl.fma(a, b, c)
    elif OP == "muladd":
        r = a * b + c
    elif OP == "max":
        r = tl.maximum(a, b)
    elif OP == "min":
        r = tl.minimum(a, b)
    elif OP == "neg":
        r = -a
    elif OP == "lt":
        r = tl.where(a < b, a, b)
    elif OP == "i2bf":
        r = (tl.load(a_ptr.to(tl.pointer_type(tl.int32)) + i)).to(tl.bfloat16)
    elif OP == "atomic":
        r = tl.atomic_add(o_ptr + i, a)
    elif OP == "clamp":
        r = tl.clamp(a, b, c)
    elif OP == "cumsum":
        r = tl.cumsum(a, 0)
    if OP == "sum":
        tl.store(o_ptr + tl.arange(0, BLOCK // 16), tl.sum(tl.reshape(a, (BLOCK // 16, 16)), axis=1))
    elif OP == "rmax":
        tl.store(o_ptr + tl.arange(0, BLOCK // 16), tl.max(tl.reshape(a, (BLOCK // 16, 16)), axis=1))
    else:
        tl.store(o_ptr + i, r)


def main() -> None:
    sig = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "o_ptr": "*bf16", "OP": "constexpr",
           "BLOCK": "constexpr"}
    for cap in sys.argv[1].split(","):
        for op in sys.argv[2].split(","):
            try:
                k = triton.compile(ASTSource(binop, sig, constexprs={"OP": op, "BLOCK": 256}),
                                   target=GPUTarget("cuda", int(cap), 32))
            except Exception as e:  # what the frontend refuses is part of the answer
                print(cap, op, "refused:", str(e).splitlines()[-1][:150])
                continue
            ptx = k.asm["ptx"]
            ins = set(re.findall(r"^\s*(?:@%p\d+\s+)?([a-z][\w.]+)", ptx, re.M))
            keep = sorted(x for x in ins if re.search(r"bf16|f32|f16|shfl|atom|max|min|fma|div|cvt|setp", x))
            print(cap, op, keep, "fma.rn.bf16 x", ptx.count("fma.rn.bf16"))


if __name__ == "__main__":
    main()
