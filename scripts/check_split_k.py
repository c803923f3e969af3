"""A split-K ``scaled_gemm`` on a GPU against the interpreter lane, bit for bit (no golden: the operands alone
would take 200 KB of the golden dir's 8 MB).

    python scripts/check_split_k.py --capture OUT.npz      # GPU: seeded operands and the products
    python scripts/check_split_k.py --compare OUT.npz      # CPU: the interpreter with the harness's shims

Operands are drawn on the CPU from a fixed seed (e2m1 codes and e8m0 scales, or e4m3 codes for A), so both sides
see the same bytes; the capture stores them beside the products, and the comparison checks them first. Shapes:
skinny products whose ``k_splits`` is above 1, and one that does not split.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHAPES = [(16, 80, 4096), (16, 64, 8192), (16, 80, 1024)]
FORMATS = ("e2m1", "e4m3")


def operands(m: int, n: int, k: int, a_format: str):
    import torch

    g = torch.Generator().manual_seed(m * 1_000_003 + n * 1009 + k + (7 if a_format == "e4m3" else 0))
    if a_format == "e4m3":
        codes = torch.randint(0, 256, (m, k), generator=g, dtype=torch.int32)
        codes[(codes & 0x7F) == 0x7F] = 0  # no NaN codes
        a = (codes.to(torch.uint8).view(torch.float8_e4m3fn), torch.randint(118, 136, (m, k // 32), generator=g,
                                                                            dtype=torch.int32).to(torch.uint8))
    else:
        a = (torch.randint(0, 256, (m, k // 2), generator=g, dtype=torch.int32).to(torch.uint8),
             torch.randint(118, 136, (m, k // 32), generator=g, dtype=torch.int32).to(torch.uint8))
    b = (torch.randint(0, 256, (n, k // 2), generator=g, dtype=torch.int32).to(torch.uint8),
         torch.randint(118, 136, (n, k // 32), generator=g, dtype=torch.int32).to(torch.uint8))
    return a, b


def products(device: str) -> dict[str, np.ndarray]:
    import torch

    from kernels.mx.gemm import k_splits, scaled_gemm

    out = {}
    for m, n, k in SHAPES:
        for f in FORMATS:
            a, b = operands(m, n, k, f)
            name = f"{f}_{m}x{n}x{k}_split{k_splits(m, n, k)}"
            c = scaled_gemm(tuple(t.to(device) for t in a), tuple(t.to(device) for t in b), "mxfp4", a_format=f)
            out[name] = c.cpu().numpy()
            out[name + "__a"] = a[0].view(torch.uint8).numpy()
            out[name + "__b"] = b[0].numpy()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--capture", type=Path, help="GPU: write the products here")
    p.add_argument("--compare", type=Path, help="CPU: compare the interpreter's products with this capture")
    a = p.parse_args()
    sys.path.insert(0, str(ROOT))
    if a.capture:
        import torch
        import triton

        got = products("cuda")
        meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
        np.savez_compressed(a.capture, meta=np.array(json.dumps(meta)), **got)
        print(a.capture, meta)
        return 0
    if not a.compare:
        p.error("give --capture OUT.npz (GPU) or --compare OUT.npz (CPU)")
    os.environ["TRITON_INTERPRET"] = "1"
    from harness.interp import shims
    from harness.interp.patch import Patch

    shims.install(Patch(), "sm90")
    z = np.load(a.compare, allow_pickle=False)
    got = products("cpu")
    bad = 0
    for name, c in got.items():
        if name.endswith(("__a", "__b")):
            if not np.array_equal(c, z[name]):
                print(f"{name}: the operands differ from the capture's")
                bad += 1
            continue
        differ = int((c.view(np.int32) != z[name].view(np.int32)).sum())
        bad += differ > 0
        print(f"{name}: {differ} of {c.size} products differ from {json.loads(str(z['meta']))['device']}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
