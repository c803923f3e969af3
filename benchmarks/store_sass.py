"""Why the turboquant store is slow, from its machine code: SASS instructions per (token, kv-head) row of the
int64-word store kernel as shipped, compiled ahead of time as a launch on bench_turboquant.py's inputs would
compile it (Triton's specialization of the argument values included; no GPU needed: Triton's bundled ptxas and
cuobjdump), and the time a GPU needs just to *issue* them beside the time its memory needs to move the bytes.
The installed Triton compiles: the H200 image runs 3.6, and 3.9 lays the same kernel out differently.

The kernel is straight-line code (the IEEE-division slow paths are out of line and not taken for ordinary
inputs), so the static count is what every program executes. A GPU issues at most ``4 x SMs x clock``
warp-instructions per second (H200: 4 schedulers x 132 SMs x 1.98 GHz); with one warp per program,
``rows x instructions per row / that rate`` is a floor on the store's time. When it is above the byte floor,
the kernel is issue-bound and only fewer instructions per row make it faster (docs/performance.md).

    python benchmarks/store_sass.py [--arch 90] [--sms 132] [--ghz 1.98] [--copy-gbs 4224] [--json PATH] [--op load]

``--op load`` counts the load's word kernel instead (``kernels.turboquant.load``, e4nv, its launch config; bytes:
the slot read + fp32 key and value written).

Not a test; prints a table.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import re
from pathlib import Path

import _common  # noqa: F401  (puts the repo root on sys.path)
import triton
from _common import cuobjdump

import kernels.turboquant.load as load
import kernels.turboquant.store as store
from kernels.turboquant import slot_bytes

# (head_dim, dtype, num_tokens, num_kv_heads, block_size, key format): the >= 1M token-head shapes of
# bench_turboquant.py
CASES = [(128, "bf16", 131072, 8, 16, "e4nv"), (128, "bf16", 131072, 8, 16, "e4b15"),
         (96, "bf16", 131072, 8, 64, "e4nv"), (256, "bf16", 131072, 8, 32, "e4nv"),
         (128, "fp16", 131072, 8, 16, "e4nv"), (80, "fp32", 65536, 16, 128, "e4nv")]
_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}
_LINE = re.compile(r"\s*/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)")


def _specialized(sig: dict[str, str], ints: dict[str, int], kernel=None) -> tuple[dict[str, str], dict[str, int],
                                                                                dict]:
    """``sig`` with Triton's launch-time specialization of these argument values (Triton 3.6-3.9): an int equal
    to 1 becomes a constexpr, an int divisible by 16 and every pointer (a torch allocation, 16-byte aligned)
    carry ``tt.divisibility = 16``, except where ``kernel`` declares a parameter ``do_not_specialize`` (no
    specialization) or ``do_not_specialize_on_alignment`` (no divisibility). Without it the SASS is not what a
    launch runs (strides divisible by 16 let loads widen)."""
    params = {p.name: p for p in getattr(kernel, "params", [])}
    sig, consts, attrs = dict(sig), {}, {}
    for i, name in enumerate(sig):
        p = params.get(name)
        if p is not None and p.do_not_specialize:
            continue
        aligned_ok = p is None or not p.do_not_specialize_on_alignment
        if sig[name].startswith("*"):
            if aligned_ok:
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif ints[name] == 1:
            sig[name], consts[name] = "constexpr", 1
        elif ints[name] % 16 == 0 and aligned_ok:
            attrs[(i,)] = [["tt.divisibility", 16]]
    return sig, consts, attrs


def _launch_ints(op: str, head_dim: int, dtype: str, tokens: int, heads: int, block_size: int) -> dict[str, int]:
    """The int arguments ``tq_store_k8v4`` / ``tq_load_k8v4`` pass for bench_turboquant.py's inputs of this
    shape (contiguous sources and outputs, a cache of twice the slots needed, int64 slots)."""
    num_blocks = (2 * tokens + block_size - 1) // block_size
    slot_words = slot_bytes(head_dim) // 4
    cache = {"stride_cb": block_size * heads * slot_words, "stride_cs": heads * slot_words, "stride_ch": slot_words,
             "stride_s": 1, "num_heads": heads, "block_size": block_size, "num_slots": num_blocks * block_size}
    if op == "load":
        return {**cache, "stride_ot": heads * head_dim, "stride_oh": head_dim, "num_tokens": tokens}
    per_row = head_dim * _BYTES[dtype] // 8  # int64 words
    return {**cache, "stride_kt": heads * per_row, "stride_kh": per_row, "stride_vt": heads * per_row,
            "stride_vh": per_row, "num_tokens": tokens}


def sass_ops(head_dim: int, dtype: str, fmt: str, arch: int, op: str = "store", tokens: int = 131072,
             heads: int = 8, block_size: int = 16) -> tuple[collections.Counter, int, int]:
    """(opcode counts, rows per program, warps) of the store's (or the load's) word kernel compiled for
    ``sm{arch}`` as it is launched on a ``tokens`` x ``heads`` batch of this shape."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    if op == "load":
        sig, constexprs, warps = load.load_words_compile_spec(fmt, head_dim=head_dim, num_heads=heads,
                                                              block_size=block_size)
        kernel = load._load_k8v4_words_kernel
    else:
        sig, constexprs, warps = store.words_compile_spec(dtype, fmt, head_dim=head_dim, num_heads=heads,
                                                          block_size=block_size, arch=arch)
        kernel = store._store_k8v4_words_kernel
    sig, ones, attrs = _specialized(sig, _launch_ints(op, head_dim, dtype, tokens, heads, block_size), kernel)
    sig.update({name: "constexpr" for name in constexprs})
    with contextlib.redirect_stdout(io.StringIO()):
        compiled = triton.compile(ASTSource(kernel, sig, {**ones, **constexprs}, attrs),
                                  target=GPUTarget("cuda", arch, 32), options={"num_warps": warps})
    sass = cuobjdump(compiled.asm["cubin"], "-sass")
    ops = collections.Counter(m.group(1) for line in sass.splitlines() if (m := _LINE.match(line)))
    if not ops:
        raise RuntimeError(f"no SASS instructions parsed from cuobjdump output for d{head_dim} {dtype}")
    rows = constexprs["TOKS"] * constexprs["HEADS"] if "TOKS" in constexprs else constexprs["ROWS"]
    return ops, rows, warps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", type=int, default=90, help="compute capability to compile for (default 90)")
    p.add_argument("--sms", type=int, default=132, help="SM count of the GPU to model (H200: 132)")
    p.add_argument("--ghz", type=float, default=1.98, help="SM clock in GHz (H200 boost: 1.98)")
    p.add_argument("--copy-gbs", type=float, default=4224.0, help="measured copy bandwidth, GB/s (H200: 4,224)")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--op", choices=("store", "load"), default="store", help="which word kernel (default store)")
    a = p.parse_args()
    for name, v in (("--sms", a.sms), ("--ghz", a.ghz), ("--copy-gbs", a.copy_gbs)):
        if not v > 0:
            raise SystemExit(f"{name} must be > 0, got {v}")
    issue_rate = 4 * a.sms * a.ghz * 1e9  # warp-instructions per second
    rows_out = []
    if a.op == "store":
        cases = CASES
    else:  # the load writes fp32 whatever the store read: one case per head_dim
        first = {}
        for d, _, t, h, bs, _ in CASES:
            first.setdefault(d, (d, "fp32", t, h, bs, "e4nv"))
        cases = list(first.values())
    print(f"{a.op} kernel SASS, sm{a.arch}, Triton {triton.__version__}, as launched on bench_turboquant.py's inputs; "
          f"issue floor at {issue_rate / 1e12:.3f} T warp-instr/s, byte floor at {a.copy_gbs:,.0f} GB/s")
    print(f"{'case':<16} {'rows/prog':>9} {'warps':>5} {'SASS':>6} {'per row':>8} {'issue ms':>9} {'bytes ms':>9}  "
          "top opcodes")
    for head_dim, dtype, tokens, heads, block_size, fmt in cases:
        ops, rows, warps = sass_ops(head_dim, dtype, fmt, a.arch, a.op, tokens, heads, block_size)
        total = sum(ops.values())
        per_row = total * warps / rows
        n = tokens * heads
        src = 2 * head_dim * (_BYTES[dtype] if a.op == "store" else 4)  # key + value read (store) / written (load)
        nbytes = n * (src + slot_bytes(head_dim)) + tokens * 8
        issue_ms = n * per_row / issue_rate * 1e3
        bytes_ms = nbytes / (a.copy_gbs * 1e9) * 1e3
        case = f"d{head_dim} {dtype}" + (f" {fmt}" if fmt != "e4nv" else "")
        top = ", ".join(f"{k} {v}" for k, v in ops.most_common(5))
        print(f"{case:<16} {rows:>9} {warps:>5} {total:>6} {per_row:>8.0f} {issue_ms:>9.3f} {bytes_ms:>9.3f}  {top}")
        rows_out.append({"case": case, "token_heads": n, "rows_per_program": rows, "warps": warps, "sass": total,
                         "per_row": per_row, "issue_floor_ms": issue_ms, "byte_floor_ms": bytes_ms,
                         "opcodes": dict(ops)})
    if a.json is not None:
        a.json.write_text(json.dumps({"arch": a.arch, "triton": triton.__version__, "sms": a.sms, "ghz": a.ghz,
                                      "rows": rows_out}, indent=1) + "\n")


if __name__ == "__main__":
    main()
