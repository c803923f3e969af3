"""Capture what a GPU's Triton FP8 casts produce, for every fp16/bf16 input and an fp32 sample.

Ground truth for the harness's codecs, so it shares no code with them: the kernels are
``harness.cast_probe`` (Triton only, the same instructions the CPU tests run). Writes one .npz (no pickle)
plus a JSON of versions.

    python scripts/capture_fp8_tables.py OUTDIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's harness, installed or not
from harness.cast_probe import fp8_cast, fp8_decode  # noqa: E402

FORMATS = {"e4nv": "float8e4nv", "e5m2": "float8e5", "e4b15": "float8e4b15"}
FP32_SAMPLE_SEED = 20261202
FP32_RANDOM = 1 << 20


def fp32_sample() -> torch.Tensor:
    """Random fp32 bit patterns plus every fp8 grid midpoint and its fp32 neighbours (the tie cases)."""
    g = torch.Generator().manual_seed(FP32_SAMPLE_SEED)
    rnd = torch.randint(-(2**31), 2**31 - 1, (FP32_RANDOM,), generator=g, dtype=torch.int64).to(torch.int32)
    rnd = rnd.view(torch.float32)
    # magnitudes spread over the FP8 ranges: |x| in [2^-24, 2^17]
    expo = torch.randint(-24, 18, (FP32_RANDOM,), generator=g).float()
    mant = torch.rand(FP32_RANDOM, generator=g) + 1.0
    sign = torch.where(torch.rand(FP32_RANDOM, generator=g) < 0.5, -1.0, 1.0)
    spread = sign * mant * torch.exp2(expo)
    ties = []
    for scale in (1.0, 1.0 / 256.0):  # e4m3 grid, and the e4b15 grid (= e4m3 / 256)
        for dt in (torch.float8_e4m3fn, torch.float8_e5m2):
            grid = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dt).float()
            grid = grid[torch.isfinite(grid)].unique().sort().values * scale
            mid = (grid[1:] + grid[:-1]) / 2
            ties.append(mid)
    ties = torch.cat(ties)
    bits = ties.view(torch.int32)
    near = torch.cat([(bits + d).view(torch.float32) for d in (-1, 0, 1)])
    edge = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 448.0, 464.0, 480.0,
                         57344.0, 61440.0, 1.75, 1.8125, 1.875, 2.0, 1e-30, -1e-30], dtype=torch.float32)
    return torch.cat([edge, near, near.neg(), spread, rnd])


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    bits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    inputs = {"fp16": bits.view(torch.float16), "bf16": bits.view(torch.bfloat16), "fp32": fp32_sample()}
    arrays: dict[str, np.ndarray] = {"fp32_inputs": inputs["fp32"].view(torch.int32).numpy()}
    notes: dict[str, str] = {}
    for sname, x in inputs.items():
        xd = x.to(dev)
        for fname, tname in FORMATS.items():
            for via in (False, True):
                key = f"{sname}_{fname}{'_via_fp32' if via else ''}"
                if via and sname == "fp32":
                    continue
                y = torch.empty(xd.numel(), dtype=torch.uint8, device=dev)
                try:
                    fp8_cast[(triton.cdiv(xd.numel(), 1024),)](xd, y, xd.numel(), getattr(tl, tname), via,
                                                             BLOCK=1024)
                    torch.cuda.synchronize()
                    arrays[key] = y.cpu().numpy()
                    notes[key] = "ok"
                except Exception as e:  # record the compile refusal itself: it is part of the fact sheet
                    notes[key] = f"{type(e).__name__}: {str(e).splitlines()[-1][:300] if str(e) else ''}"
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).to(dev)
    for fname, tname in FORMATS.items():
        y = torch.empty(256, dtype=torch.float32, device=dev)
        fp8_decode[(1,)](codes, y, getattr(tl, tname))
        arrays[f"decode_{fname}"] = y.cpu().numpy()
    np.savez_compressed(out / "fp8_tables.npz", **arrays)
    meta = {
        "device": torch.cuda.get_device_name(),
        "capability": list(torch.cuda.get_device_capability()),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "fp32_sample_seed": FP32_SAMPLE_SEED,
        "notes": notes,
    }
    (out / "fp8_tables.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    print(json.dumps(meta, indent=1, sort_keys=True))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
