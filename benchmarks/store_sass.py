"""Why the turboquant store is slow, from its machine code: SASS instructions per (token, kv-head) row of the
int64-word store kernel as shipped, compiled ahead of time by the harness's compile matrix (no GPU needed:
Triton's bundled ptxas and cuobjdump), and the time a GPU needs just to *issue* them beside the time its
memory needs to move the bytes.

The kernel is straight-line code (the IEEE-division slow paths are out of line and not taken for ordinary
inputs), so the static count is what every program executes. A GPU issues at most ``4 x SMs x clock``
warp-instructions per second (H200: 4 schedulers x 132 SMs x 1.98 GHz); with one warp per program,
``rows x instructions per row / that rate`` is a floor on the store's time. When it is above the byte floor,
the kernel is issue-bound and only fewer instructions per row make it faster (docs/performance.md).

    python benchmarks/store_sass.py [--arch 90] [--sms 132] [--ghz 1.98] [--copy-gbs 4224] [--json PATH] [--op load]

``--op load`` counts the load's word kernel instead (``kernels.turboquant.load``, e4nv, its launch config; bytes:
the slot read + fp32 key and value written). Compiled without the launch's divisibility hints, so its stores
count as 4-byte ones: an upper bound.

Not a test; prints a table.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

import _common  # noqa: F401  (puts the repo root on sys.path)
import triton

import kernels.turboquant.load as load
import kernels.turboquant.store as store
from harness.compile import matrix as cm
from kernels.turboquant import slot_bytes

ROWS = 1 << 20  # token-heads, as in bench_turboquant.py's 128k x 8 rows
CASES = [(128, "bf16"), (96, "bf16"), (256, "bf16"), (128, "fp16"), (80, "fp32")]
_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}
_LINE = re.compile(r"\s*/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)")


def sass_ops(head_dim: int, dtype: str, fmt: str, arch: int, op: str = "store") -> tuple[collections.Counter, int, int]:
    """(opcode counts, rows per program, warps) of the store's (or the load's) word kernel compiled for
    ``sm{arch}``."""
    if op == "load":
        sig, constexprs, warps = load.load_words_compile_spec(fmt, head_dim=head_dim)
        kernel = load._load_k8v4_words_kernel
    else:
        sig, constexprs, warps = store.words_compile_spec(dtype, fmt, head_dim=head_dim)
        kernel = store._store_k8v4_words_kernel
    (compiled,) = cm.compile_matrix(kernel, signature=sig, constexprs=constexprs,
                                    targets=[f"sm{arch}"], options={"num_warps": warps}).values()
    if isinstance(compiled, BaseException):
        raise compiled
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as d:
        cubin = os.path.join(d, "k.cubin")
        Path(cubin).write_bytes(compiled.asm["cubin"])
        sass = subprocess.run([str(tool), "-sass", cubin], capture_output=True, text=True, check=True).stdout
    ops = collections.Counter(m.group(1) for line in sass.splitlines() if (m := _LINE.match(line)))
    if not ops:
        raise RuntimeError(f"no SASS instructions parsed from cuobjdump output for d{head_dim} {dtype}")
    return ops, constexprs["TOKS"] * constexprs["HEADS"], warps


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
    cases = CASES if a.op == "store" else [(d, "fp32") for d in (128, 96, 80, 256)]  # the load: fp32 out
    print(f"{a.op} kernel SASS, sm{a.arch}, {ROWS:,} rows; issue floor at {issue_rate / 1e12:.3f} T warp-instr/s, "
          f"byte floor at {a.copy_gbs:,.0f} GB/s")
    print(f"{'case':<14} {'rows/prog':>9} {'warps':>5} {'SASS':>6} {'per row':>8} {'issue ms':>9} {'bytes ms':>9}  "
          "top opcodes")
    for head_dim, dtype in cases:
        ops, rows, warps = sass_ops(head_dim, dtype, "e4nv", a.arch, a.op)
        total = sum(ops.values())
        per_row = total * warps / rows
        elem = _BYTES[dtype]
        nbytes = ROWS * (2 * head_dim * elem + slot_bytes(head_dim)) + (ROWS // 8) * 8
        issue_ms = ROWS * per_row / issue_rate * 1e3
        bytes_ms = nbytes / (a.copy_gbs * 1e9) * 1e3
        case = f"d{head_dim} {dtype}"
        top = ", ".join(f"{k} {v}" for k, v in ops.most_common(5))
        print(f"{case:<14} {rows:>9} {warps:>5} {total:>6} {per_row:>8.0f} {issue_ms:>9.3f} {bytes_ms:>9.3f}  {top}")
        rows_out.append({"case": case, "rows_per_program": rows, "warps": warps, "sass": total, "per_row": per_row,
                         "issue_floor_ms": issue_ms, "byte_floor_ms": bytes_ms, "opcodes": dict(ops)})
    if a.json is not None:
        a.json.write_text(json.dumps({"arch": a.arch, "sms": a.sms, "ghz": a.ghz, "rows": rows_out}, indent=1) + "\n")


if __name__ == "__main__":
    main()
