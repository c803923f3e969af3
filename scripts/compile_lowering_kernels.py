#!/usr/bin/env python
"""Compile every launch of the everyday-pattern kernels (issue 38) for sm90 with the installed Triton, on a machine
with no GPU: step 1 of goldens of a Triton the GPU image does not have (3.9).

    python scripts/compile_lowering_kernels.py OUTDIR [--patterns layernorm,row_sum] [--arch sm90]

Runs each case of ``tests.lowering.kernels.PATTERNS`` as the capture does (``kernels.launch`` on the fixed-seed
inputs, CPU tensors: 64-byte aligned, so every pointer specializes as divisible by 16 as a CUDA tensor's does),
with the kernels' ``JITFunction.run`` replaced by a recorder (:class:`tests.lowering.aot.Recorder`): per launch,
in order, the specialization Triton's JIT would make, compiled for ``--arch`` (sm90 compiles as ``sm_90a``, as
Triton does for capability 9.0). Nothing runs. OUTDIR gets one ``<kernel>-<key>.cubin`` and ``.ptx`` per distinct
specialization and ``manifest.json`` (Triton and ptxas versions, per kernel its launch metadata and parameter
list checked against the PTX entry, per pattern / case / launch the kernel, grid and scalars).

Step 2, on the GPU: ``python scripts/capture_lowering_goldens.py --compiled OUTDIR --out golden/lowering/triton3.9``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="directory for the cubins, PTX and manifest.json (created)")
    ap.add_argument("--patterns", default="", help="comma-separated subset of the patterns (default: all)")
    ap.add_argument("--arch", default="sm90", help="the CUDA target (default sm90)")
    args = ap.parse_args(argv)
    if "triton" in sys.modules:
        print("compile_lowering_kernels: run as a script (triton must be imported with TRITON_INTERPRET unset)",
              file=sys.stderr)
        return 2
    os.environ.pop("TRITON_INTERPRET", None)  # the kernels must be JITFunctions, whose run the recorder replaces
    from triton.runtime.jit import JITFunction

    from harness.interp.patch import Patch
    from tests.lowering import aot, kernels

    try:
        wanted = kernels.select(args.patterns)
    except ValueError as e:
        print(f"compile_lowering_kernels: {e}", file=sys.stderr)
        return 2
    if (args.out / "manifest.json").exists():
        print(f"compile_lowering_kernels: {args.out}/manifest.json exists; give an empty directory", file=sys.stderr)
        return 2
    rec = aot.Recorder(args.out, args.arch)
    t0 = time.perf_counter()
    with Patch.context() as patch:
        aot.hook(patch, JITFunction, rec)
        for pattern in wanted:
            for case, p in kernels.PATTERNS[pattern]:
                rec.begin(pattern, case)
                kernels.launch(pattern, p, kernels.make_inputs(pattern, p), "cpu")
            print(f"{pattern}: {len(kernels.PATTERNS[pattern])} cases, {len(rec.manifest['kernels'])} kernels so far",
                  flush=True)
    path = rec.write()
    size = sum(f.stat().st_size for f in args.out.iterdir())
    print(f"{path}: Triton {rec.manifest['triton']}, ptxas {rec.manifest['ptxas']} ({rec.manifest['ptxas_tool']}), "
          f"{len(rec.manifest['kernels'])} kernels, {size / 1e6:.1f} MB, {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
