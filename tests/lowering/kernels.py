"""Everyday-pattern kernels whose outputs depend on the compiler's choices around the arithmetic: fp
contraction of ``a * b + c`` and the order of reductions and scans (issue 38).

They are written the way norm / softmax / quant kernels are written: one program per row of a row-major
``(M, N)`` block, ``BLOCK_N`` a power of two covering the row. ``scripts/capture_lowering_goldens.py`` runs them
on a GPU and saves inputs and outputs; the CPU lane reruns them from here. This module imports triton and
nothing of the harness, so the capture script runs on a bare GPU image.

Each ``PATTERNS`` entry names a kernel and how to launch it (:func:`launch`).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def affine(x_ptr, y_ptr, s, b, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + offs, mask=m)
    y = x * s + b
    tl.store(y_ptr + offs, y, mask=m)


@triton.jit
def fma_elementwise(a_ptr, b_ptr, c_ptr, y_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    a = tl.load(a_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs, mask=m)
    c = tl.load(c_ptr + offs, mask=m)
    y = a * b + c
    tl.store(y_ptr + offs, y, mask=m)


@triton.jit
def acc_loop(a_ptr, b_ptr, y_ptr, K, N, BLOCK: tl.constexpr):
    # y[n] = sum_k a[k, n] * b[k, n], accumulated as `acc += a * b` in fp32.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for k in range(0, K):
        a = tl.load(a_ptr + k * N + offs, mask=m).to(tl.float32)
        b = tl.load(b_ptr + k * N + offs, mask=m).to(tl.float32)
        acc += a * b
    tl.store(y_ptr + offs, acc, mask=m)


@triton.jit
def layernorm(x_ptr, w_ptr, b_ptr, y_ptr, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    m = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    d = tl.where(m, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=m).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=m).to(tl.float32)
    y = (x - mean) * rstd * w + b
    tl.store(y_ptr + row * N + cols, y.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def softmax(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    m = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=m, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, axis=0)
    e = tl.exp(z)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * N + cols, y.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def log_softmax(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    m = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=m, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, axis=0)
    y = z - tl.log(tl.sum(tl.exp(z), axis=0))
    tl.store(y_ptr + row * N + cols, y.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def row_sum(x_ptr, y_ptr, M, N: tl.constexpr, BLOCK_M: tl.constexpr):
    # sums along axis 1 of a (BLOCK_M, N) block, in the input dtype
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=rows[:, None] < M)
    tl.store(y_ptr + rows, tl.sum(x, axis=1), mask=rows < M)


@triton.jit
def col_sum(x_ptr, y_ptr, N, M: tl.constexpr, BLOCK_N: tl.constexpr):
    # sums along axis 0 of an (M, BLOCK_N) block, in the input dtype
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = tl.arange(0, M)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=cols[None, :] < N)
    tl.store(y_ptr + cols, tl.sum(x, axis=0), mask=cols < N)


@triton.jit
def row_max_argmax(x_ptr, v_ptr, i_ptr, N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + row * N + cols)
    tl.store(v_ptr + row, tl.max(x, axis=0))
    tl.store(i_ptr + row, tl.argmax(x, axis=0))


@triton.jit
def row_cumsum(x_ptr, y_ptr, N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + row * N + cols)
    tl.store(y_ptr + row * N + cols, tl.cumsum(x, axis=0))


@triton.jit
def row_cumprod(x_ptr, y_ptr, N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + row * N + cols)
    tl.store(y_ptr + row * N + cols, tl.cumprod(x, axis=0))


@triton.jit
def scaled_loop(x_ptr, y_ptr, s, K, BLOCK: tl.constexpr):
    # p is computed before the loop, the add inside it: LLVM (one basic block at a time) leaves mul.f32 and
    # add.f32 apart, and ptxas, unrolling, contracts `* 0.75` of one iteration with `+ p` of the next.
    offs = tl.arange(0, BLOCK)
    p = tl.load(x_ptr + offs) * s
    acc = tl.load(y_ptr + offs)
    for _ in range(K):
        acc = acc + p
        acc = acc * 0.75
    tl.store(y_ptr + offs, acc)


@triton.jit
def masked_variance(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr):
    # a norm's variance as FlagGems' layer_norm writes it: the squared deviation selected by tl.where, then summed.
    # With N divisible by 16 each 4-element vector shares one mask bit and LLVM folds the selects out of the
    # sum's first adds, which it then contracts with the multiply
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    m = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
    d = x - tl.sum(x, axis=0) / N
    s = tl.where(m, d * d, 0)
    tl.store(y_ptr + row, tl.sum(s, axis=0))


@triton.jit
def rms_norm(y_ptr, x_ptr, w_ptr, r_ptr, n_cols, eps, BLOCK: tl.constexpr):
    # rms_norm as inference engines write it. At 16 fp32 elements a thread, Triton 3.9's LLVM (SLP vectorizer)
    # folds the right-hand square into the fma in some pairs of the in-thread tree (its sm90 PTX)
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=m, other=0)
    w = tl.load(w_ptr + cols, mask=m, other=0)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(r_ptr + row, rstd)
    tl.store(y_ptr + row * n_cols + cols, x * rstd * w, mask=m)


@triton.jit
def dot_sum(a_ptr, b_ptr, r_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    # sums of a tl.dot accumulator (attention's row sum of p, the QSA logits' sum over heads): the reduction
    # runs in the MMA layout (#ttg.nvidia_mma): in-thread over a thread's registers, then over 4 lanes (a row)
    # or 8 lanes and the warps (a column)
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    acc = tl.dot(a, b)
    tl.store(r_ptr + rm, tl.sum(acc, axis=1))
    tl.store(c_ptr + rn, tl.sum(acc, axis=0))


# --- the cases: inputs from a fixed seed, one launch each ---------------------------------------------------

#: pattern -> list of (case name, parameters). dtype: the input element type; n: the row / block length;
#: warps: num_warps; special: value patterns where the GPU's NaN / tie handling shows.
PATTERNS: dict[str, list[tuple[str, dict]]] = {
    "affine": [(f"{dt}_n{n}_w{w}", {"dtype": dt, "n": n, "warps": w})
               for dt in ("fp32", "bf16", "fp16") for n, w in ((1024, 4), (4096, 8))],
    "fma_elementwise": [(f"{dt}_{vals}", {"dtype": dt, "n": 16384, "warps": 4, "values": vals})
                        for dt in ("fp32", "bf16", "fp16") for vals in ("normal", "bits")],
    "acc_loop": [(f"{dt}_w{w}", {"dtype": dt, "n": 512 * w // 4, "warps": w, "k": 64})
                 for dt in ("fp32", "bf16", "fp16") for w in (4, 8)],
    "layernorm": [(f"{dt}_n{n}_w{w}", {"dtype": dt, "n": n, "warps": w})
                  for dt in ("fp32", "bf16", "fp16") for n, w in ((1024, 4), (4096, 8), (1000, 4))],
    "softmax": [(f"{dt}_n{n}_w{w}", {"dtype": dt, "n": n, "warps": w})
                for dt in ("fp32", "bf16", "fp16") for n, w in ((1024, 4), (4096, 8))],
    "log_softmax": [(f"{dt}_n{n}_w{w}", {"dtype": dt, "n": n, "warps": w})
                    for dt in ("fp32", "bf16", "fp16") for n, w in ((1024, 4), (4096, 8))],
    "row_sum": [(f"{dt}_n{n}_m{m}_w{w}", {"dtype": dt, "n": n, "block_m": m, "warps": w})
                for dt in ("fp32", "bf16", "fp16")
                for n, m, w in ((16, 64, 4), (1024, 1, 4), (256, 8, 4), (4096, 1, 8))],
    "col_sum": [(f"{dt}_m{m}_n{n}_w{w}", {"dtype": dt, "m": m, "block_n": n, "warps": w})
                for dt in ("fp32", "bf16", "fp16") for m, n, w in ((64, 64, 4), (256, 32, 8))],
    "row_max_argmax": [(f"{dt}_n{n}_w{w}_{sp}", {"dtype": dt, "n": n, "warps": w, "special": sp})
                       for dt in ("fp32", "bf16", "fp16") for n, w in ((1024, 4), (4096, 8), (128, 1))
                       for sp in ("ties", "nan")],
    "row_cumsum": [(f"{dt}_n{n}_w{w}", {"dtype": dt, "n": n, "warps": w})
                   for dt in ("fp32", "bf16", "fp16") for n, w in ((1024, 4), (4096, 8), (128, 1))],
    "row_cumprod": [(f"{dt}_n{n}_w{w}", {"dtype": dt, "n": n, "warps": w})
                    for dt in ("fp32", "bf16") for n, w in ((1024, 4), (128, 1))],
    # ptxas unrolls the loop 4, 2, 1: trip counts leaving remainders 3 and 2, K = 1 (a constexpr: no loop), K = 0
    "scaled_loop": [("fp32", {"dtype": "fp32", "n": 128, "warps": 4, "k": 16})] +
                   [(f"fp32_n{n}_k{k}", {"dtype": "fp32", "n": n, "warps": 4, "k": k})
                    for n, k in ((128, 7), (128, 6), (128, 1), (128, 0), (512, 13))],
    "sum_of_squares": [(f"{dt}_n{n}_w{w}", {"dtype": dt, "n": n, "warps": w})
                       for dt in ("fp32", "bf16", "fp16") for n, w in ((1024, 4), (4096, 8))],
    "masked_variance": [(f"{dt}_n{n}_w{w}", {"dtype": dt, "n": n, "warps": w})
                        for dt in ("fp32", "fp16") for n, w in ((1000, 4), (2000, 4), (1024, 4), (4000, 8))],
    "rms_norm": [(f"fp32_n{n}_w{w}", {"dtype": "fp32", "n": n, "warps": w})
                 for n, w in ((4096, 8), (4096, 4), (8192, 16), (1024, 4), (5000, 16))],
    "block_sum": [(f"{dt}_n{n}_b{b}_w{w}", {"dtype": dt, "n": n, "block": b, "warps": w})
                  for dt in ("fp32", "bf16", "fp16") for n, b, w in ((100_000, 1024, 4), (20_000, 4096, 8))],
    # fp16 operands only: bf16 ones reach the same fp32 accumulator layout (the golden dir has a size budget)
    "dot_sum": [(f"fp16_m{m}_n{n}_k{k}_w{w}", {"dtype": "fp16", "m": m, "n": n, "k": k, "warps": w})
                for m, n, k, w in ((64, 64, 32, 4), (128, 128, 64, 8), (64, 256, 32, 4), (128, 32, 16, 4))],
}

def select(spec: str) -> list[str]:
    """The patterns a comma-separated ``spec`` names (all of :data:`PATTERNS` when empty); ``ValueError`` naming
    the unknown ones and the known."""
    wanted = [p for p in spec.split(",") if p] or list(PATTERNS)
    unknown = sorted(set(wanted) - set(PATTERNS))
    if unknown:
        raise ValueError(f"unknown patterns {unknown}; known: {sorted(PATTERNS)}")
    return wanted


ROWS = 16  # rows per row-wise case: each row is one program, so 16 show every order the kernel has
SEED = 38


def _torch_dtype(name: str):
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


def make_inputs(pattern: str, p: dict, seed: int = SEED) -> dict:
    """The case's inputs as CPU torch tensors (fixed seed: the GPU capture and the CPU rerun draw the same)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    dt = _torch_dtype(p["dtype"])

    def normal(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(dt)

    if pattern == "affine":
        return {"x": normal(p["n"] * 4), "s": 1.37, "b": -0.41}
    if pattern == "fma_elementwise":
        if p["values"] == "bits":
            bits = 16 if p["dtype"] != "fp32" else 32
            ints = torch.randint(0, 2**bits, (3, p["n"]), generator=g, dtype=torch.int64)
            if bits == 32:
                raw = ints.to(torch.int32).view(torch.float32)
            else:
                raw = (ints - 2**15).to(torch.int16).view(dt)
            # non-finite bit patterns exercise NaN / inf handling too
            return {"a": raw[0].contiguous(), "b": raw[1].contiguous(), "c": raw[2].contiguous()}
        return {"a": normal(p["n"]), "b": normal(p["n"]), "c": normal(p["n"])}
    if pattern == "acc_loop":
        return {"a": normal(p["k"], p["n"]), "b": normal(p["k"], p["n"])}
    if pattern == "layernorm":
        return {"x": normal(ROWS, p["n"], scale=3.0) + 1, "w": normal(p["n"]), "b": normal(p["n"]), "eps": 1e-5}
    if pattern in ("softmax", "log_softmax"):
        return {"x": normal(ROWS, p["n"], scale=4.0)}
    if pattern == "row_sum":
        return {"x": normal(ROWS, p["n"])}
    if pattern == "col_sum":
        return {"x": normal(p["m"], p["block_n"] * 4)}
    if pattern == "row_max_argmax":
        x = torch.randint(-8, 8, (ROWS, p["n"]), generator=g).to(torch.float32)  # many ties
        if p["special"] == "nan":
            pick = torch.rand(ROWS, p["n"], generator=g) < 0.01
            x = torch.where(pick, torch.full_like(x, float("nan")), x)
            x[0] = float("nan")  # an all-NaN row
            x[1, :] = 0.0
            x[1, ::3] = -0.0  # signed zeros only
        return {"x": x.to(dt)}
    if pattern == "row_cumsum":
        return {"x": normal(ROWS, p["n"])}
    if pattern == "row_cumprod":
        return {"x": (1 + normal(ROWS, p["n"]).float() * 0.01).to(dt)}
    if pattern == "scaled_loop":
        return {"x": normal(p["n"]), "y": normal(p["n"]), "s": 0.9}
    if pattern == "sum_of_squares":
        return {"x": normal(ROWS, p["n"])}
    if pattern == "block_sum":
        return {"x": normal(p["n"], scale=2.0)}
    if pattern == "masked_variance":
        return {"x": normal(ROWS, p["n"], scale=1.5) + 0.3}
    if pattern == "rms_norm":
        return {"x": normal(ROWS, p["n"]), "w": normal(p["n"], scale=0.1) + 1, "eps": 1e-6}
    if pattern == "dot_sum":
        return {"a": normal(p["m"], p["k"]), "b": normal(p["k"], p["n"])}
    raise ValueError(f"make_inputs: unknown pattern {pattern!r}")


def launch(pattern: str, p: dict, inputs: dict, device: str) -> dict:
    """Run the case on ``device`` (``"cuda"``, or ``"cpu"`` under TRITON_INTERPRET=1); the outputs as CPU
    tensors."""
    import torch

    t = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
    dt = _torch_dtype(p["dtype"])
    w = p["warps"]
    if pattern == "affine":
        n = t["x"].numel()
        y = torch.empty_like(t["x"])
        affine[(triton.cdiv(n, p["n"]),)](t["x"], y, t["s"], t["b"], n, BLOCK=p["n"], num_warps=w)
        return {"y": y.cpu()}
    if pattern == "fma_elementwise":
        n = t["a"].numel()
        y = torch.empty_like(t["a"])
        fma_elementwise[(triton.cdiv(n, 1024),)](t["a"], t["b"], t["c"], y, n, BLOCK=1024, num_warps=w)
        return {"y": y.cpu()}
    if pattern == "acc_loop":
        k, n = t["a"].shape
        y = torch.empty(n, dtype=torch.float32, device=device)
        acc_loop[(triton.cdiv(n, p["n"]),)](t["a"], t["b"], y, k, n, BLOCK=p["n"], num_warps=w)
        return {"y": y.cpu()}
    if pattern == "layernorm":
        x = t["x"]
        y = torch.empty_like(x)
        layernorm[(x.shape[0],)](x, t["w"], t["b"], y, x.shape[1], t["eps"], BLOCK_N=triton.next_power_of_2(p["n"]),
                                 num_warps=w)
        return {"y": y.cpu()}
    if pattern in ("softmax", "log_softmax"):
        x = t["x"]
        y = torch.empty_like(x)
        kern = softmax if pattern == "softmax" else log_softmax
        kern[(x.shape[0],)](x, y, x.shape[1], BLOCK_N=p["n"], num_warps=w)
        return {"y": y.cpu()}
    if pattern == "row_sum":
        x = t["x"]
        y = torch.empty(x.shape[0], dtype=dt, device=device)
        row_sum[(triton.cdiv(x.shape[0], p["block_m"]),)](x, y, x.shape[0], N=p["n"], BLOCK_M=p["block_m"],
                                                          num_warps=w)
        return {"y": y.cpu()}
    if pattern == "col_sum":
        x = t["x"]
        y = torch.empty(x.shape[1], dtype=dt, device=device)
        col_sum[(triton.cdiv(x.shape[1], p["block_n"]),)](x, y, x.shape[1], M=p["m"], BLOCK_N=p["block_n"],
                                                          num_warps=w)
        return {"y": y.cpu()}
    if pattern == "row_max_argmax":
        x = t["x"]
        v = torch.empty(x.shape[0], dtype=dt, device=device)
        i = torch.empty(x.shape[0], dtype=torch.int32, device=device)
        row_max_argmax[(x.shape[0],)](x, v, i, N=p["n"], num_warps=w)
        return {"max": v.cpu(), "argmax": i.cpu()}
    if pattern in ("row_cumsum", "row_cumprod"):
        x = t["x"]
        y = torch.empty_like(x)
        kern = row_cumsum if pattern == "row_cumsum" else row_cumprod
        kern[(x.shape[0],)](x, y, N=p["n"], num_warps=w)
        return {"y": y.cpu()}
    if pattern == "sum_of_squares":
        x = t["x"]
        y = torch.empty(x.shape[0], dtype=dt, device=device)
        sum_of_squares[(x.shape[0],)](x, y, N=p["n"], num_warps=w)
        return {"y": y.cpu()}
    if pattern == "block_sum":
        x = t["x"]
        blocks = triton.cdiv(x.numel(), p["block"])
        y = torch.empty(blocks, dtype=torch.float32, device=device)
        block_sum[(blocks,)](x, y, x.numel(), BLOCK=p["block"], num_warps=w)
        return {"y": y.cpu()}
    if pattern == "masked_variance":
        x = t["x"]
        y = torch.empty(x.shape[0], dtype=torch.float32, device=device)
        masked_variance[(x.shape[0],)](x, y, x.shape[1], BLOCK_N=triton.next_power_of_2(p["n"]), num_warps=w)
        return {"y": y.cpu()}
    if pattern == "rms_norm":
        x = t["x"]
        y, r = torch.empty_like(x), torch.empty(x.shape[0], dtype=torch.float32, device=device)
        rms_norm[(x.shape[0],)](y, x, t["w"], r, x.shape[1], t["eps"], BLOCK=triton.next_power_of_2(p["n"]),
                                num_warps=w)
        return {"y": y.cpu(), "rstd": r.cpu()}
    if pattern == "dot_sum":
        r = torch.empty(p["m"], dtype=torch.float32, device=device)
        c = torch.empty(p["n"], dtype=torch.float32, device=device)
        dot_sum[(1,)](t["a"], t["b"], r, c, M=p["m"], N=p["n"], K=p["k"], num_warps=w)
        return {"rows": r.cpu(), "cols": c.cpu()}
    if pattern == "scaled_loop":
        y = t["y"].clone()
        scaled_loop[(1,)](t["x"], y, t["s"], p["k"], BLOCK=p["n"], num_warps=w)
        return {"y": y.cpu()}
    raise ValueError(f"launch: unknown pattern {pattern!r}")


def input_digest(inputs: dict) -> str:
    """sha256 of a case's inputs (tensors' bit patterns and scalars, by name): a capture stores it instead of
    the inputs, which :func:`make_inputs` draws again from the fixed seed; a mismatch means the draw changed."""
    import hashlib

    import torch

    h = hashlib.sha256()
    for name in sorted(inputs):
        v = inputs[name]
        h.update(name.encode())
        if isinstance(v, torch.Tensor):
            t = v.detach().cpu().contiguous()
            h.update(f"{t.dtype}{tuple(t.shape)}".encode())
            h.update(t.view(torch.uint8).numpy().tobytes())
        else:
            h.update(repr(float(v)).encode())
    return h.hexdigest()


#: leading rows (or elements, of a 1-D output) a golden keeps in full beside the digest of the whole output
KEPT = 512


def output_digest(bits) -> str:  # noqa: ANN001 - a numpy array of bit patterns
    """sha256 of an output's bit patterns (shape and dtype included): what a golden stores for the whole output,
    beside its first :data:`KEPT` elements (the repository's golden dir has a size budget)."""
    import hashlib

    import numpy as np

    a = np.ascontiguousarray(bits)
    h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
    h.update(a.tobytes())
    return h.hexdigest()


def kept(bits):  # noqa: ANN001, ANN201 - a numpy array in, its kept leading part out
    """The leading part of an output a golden keeps in full (the digest covers the rest): its first :data:`KEPT`
    elements in row-major order, 1-D."""
    return bits.reshape(-1)[:KEPT]


def inputs_from_golden(z, pattern: str, case: str) -> tuple[dict, dict]:  # noqa: ANN001 - an open np.load(...)
    """A captured case back as ``(params, inputs)``: the inputs drawn again (:func:`make_inputs`) and checked
    against the capture's digest, so a golden is never compared on other inputs than the GPU saw."""
    import json

    names = [str(c) for c in z["cases"]]
    if case not in names:
        raise KeyError(f"inputs_from_golden: no case {case!r}; the file has {names}")
    p = json.loads(str(z["params"][names.index(case)]))
    inputs = make_inputs(pattern, p)
    want = str(z[f"{case}__digest"])
    if input_digest(inputs) != want:
        raise ValueError(f"inputs_from_golden: {pattern}/{case}: the inputs drawn here (seed {SEED}) are not the "
                         f"ones captured (digest {want[:12]}...): torch's generator or make_inputs changed; recapture")
    return p, inputs


@triton.jit
def block_sum(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # a partial sum per block, as two-stage sums are written: tl.sum with no axis reshapes the block to 1-D with
    # allow_reorder, from the vectorized load's layout into the reduction's
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0).to(tl.float32)
    tl.store(y_ptr + tl.program_id(0), tl.sum(x))


@triton.jit
def sum_of_squares(x_ptr, y_ptr, N: tl.constexpr):
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + tl.program_id(0) * N + cols)
    tl.store(y_ptr + tl.program_id(0), tl.sum(x * x, axis=0))





@triton.jit
def rms_scale(x_ptr, w_ptr, y_ptr, n, eps, b, BLOCK: tl.constexpr):
    # an rmsnorm written in 16 bits, as public kernels write it: a row of n (no multiple of 16: one 16-bit load per
    # register), its mean square, x * rsqrt(ms + eps) * (b + w)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + tl.program_id(0).to(tl.int64) * n + cols, mask=mask, other=0)
    w = tl.load(w_ptr + cols, mask=mask, other=0)
    ms = tl.sum(x * x, axis=0) / n
    r = tl.math.rsqrt(ms + eps.to(x.dtype))
    tl.store(y_ptr + tl.program_id(0).to(tl.int64) * n + cols, x * r * (b.to(x.dtype) + w), mask=mask)
