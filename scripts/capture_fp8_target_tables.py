"""Run the per-target FP8 cast PTX (from ``compile_fp8_target_ptx.py``) on one GPU and table every code.

PTX is forward-compatible: the driver JIT-compiles the sm75/sm80/sm86/sm89 lowering for the device at hand,
so one H200 measures what each target's Triton lowering computes (the instructions are the target's; only
the machine code is the device's). Inputs: every fp16 and bf16 bit pattern, and an fp32 sample (seeded): FP8
grid midpoints of every format with their fp32 neighbours, magnitudes spread over the FP8 ranges, random
bit patterns. Standalone (no harness import): it is the ground truth the harness is checked against.

    python scripts/capture_fp8_target_tables.py PTXDIR OUTDIR

Writes ``fp8_targets_sm<NN>.npz`` per target (uint8 codes per case id, the input bit patterns, and ``meta``,
a JSON string as a uint8 array) and ``fp8_targets.json``. Needs cupy.
"""

from __future__ import annotations

import datetime
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

FP32_SEED = 20261203
FP32_N = 1 << 18
#: sha256 of fp32_sample()'s bytes: the sample every committed table ran on. The golden dir stores no copy of it
#: (1 MB of its 8 MB budget); the test and the import draw it again from the seed and check this digest, so a
#: numpy whose generator drew another sample is named instead of comparing other inputs.
FP32_SHA256 = "61f7fb0ad1a0acdbb3cd4d9916034d6ce1247c60965c91c1755b5acf9facc27f"


def fp32_sample() -> np.ndarray:
    """FP32_N fp32 bit patterns (uint32): the tie cases first, then spread magnitudes, then random bits."""
    rng = np.random.default_rng(FP32_SEED)
    e4m3 = np.arange(256, dtype=np.uint8)
    grids = []
    # e4m3 values (bias 7) and e5m2 values (bias 15), decoded here without a float8 library
    for ebits, mbits, bias in ((4, 3, 7), (5, 2, 15)):
        mag = e4m3[:128].astype(np.int64)
        e = mag >> mbits
        m = mag & ((1 << mbits) - 1)
        v = np.where(e == 0, m * 2.0 ** (1 - bias - mbits), (1 + m / 2.0 ** mbits) * 2.0 ** (e - bias))
        v = v[e < (1 << ebits) - 1] if ebits == 5 else v[mag < 0x7F]
        grids.append(np.unique(v))
    mids = []
    for g in grids:
        for scale in (1.0, 1.0 / 256.0, 256.0):
            gs = np.asarray(g, dtype=np.float64) * scale
            mids.append(((gs[1:] + gs[:-1]) / 2).astype(np.float32))
    mb = np.concatenate(mids).view(np.uint32).astype(np.int64)
    near = np.concatenate([mb + d for d in (-2, -1, 0, 1, 2)]).astype(np.uint32)
    near = np.concatenate([near, near | np.uint32(0x80000000)])
    edge = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 448.0, 464.0, 480.0, 57344.0, 61440.0, 65504.0,
                     65520.0, 1.75, 1.8125, 1.875, 2.0, 1e-30, -1e-30], dtype=np.float32).view(np.uint32)
    n_spread = (FP32_N - near.size - edge.size) // 2
    spread = (rng.random(n_spread) + 1.0) * np.exp2(rng.integers(-26, 18, n_spread).astype(np.float64))
    spread = np.where(rng.random(n_spread) < 0.5, -spread, spread).astype(np.float32).view(np.uint32)
    rnd = rng.integers(0, 2**32, FP32_N - near.size - edge.size - n_spread, dtype=np.uint64).astype(np.uint32)
    out = np.concatenate([edge, near, spread, rnd])
    assert out.size == FP32_N, out.size
    return out


def is_captured_sample(bits: np.ndarray) -> bool:
    """Whether ``bits`` (fp32 bit patterns) are the sample the committed tables ran on (:data:`FP32_SHA256`)."""
    import hashlib

    return hashlib.sha256(bits.astype(np.uint32).tobytes()).hexdigest() == FP32_SHA256


def fp32_sample_as_captured() -> np.ndarray:
    """:func:`fp32_sample`, checked to be the sample the committed tables ran on: what the tests read the tables
    against."""
    sample = fp32_sample()
    if not is_captured_sample(sample):
        raise RuntimeError("fp32_sample() drew another sample than the one the H200 tables ran on (numpy's "
                           "generator changed?): the tables cannot be checked on it")
    return sample


def main(ptxdir: Path, out: Path) -> None:
    import cupy as cp

    out.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((ptxdir / "manifest.json").read_text())
    inputs = {"fp16": np.arange(65536, dtype=np.uint32).astype(np.uint16),
              "bf16": np.arange(65536, dtype=np.uint32).astype(np.uint16), "fp32": fp32_sample()}
    dev_in = {k: cp.asarray(v) for k, v in inputs.items()}
    props = cp.cuda.runtime.getDeviceProperties(0)
    per_target: dict[str, dict[str, np.ndarray]] = {}
    notes: dict[str, str] = {}
    t0 = time.time()
    for cid, k in sorted(manifest["kernels"].items()):
        target, case = cid.split("/")
        arrays = per_target.setdefault(target, {})
        if "error" in k:
            notes[cid] = "refused at compile: " + k["error"]
            continue
        src = case.split("_")[0]
        x = dev_in[src]
        n = x.size
        y = cp.full(n, 0xAA, dtype=cp.uint8)
        try:
            fn = cp.RawModule(path=str(ptxdir / k["ptx"])).get_function(k["name"])
            grid = (n + manifest["block"] - 1) // manifest["block"]
            extra = []
            for size in (k.get("global_scratch_size") or 0, k.get("profile_scratch_size") or 0):
                extra.append(cp.zeros(max(size, 1) * grid, dtype=cp.uint8) if size else np.uint64(0))
            params = (x, y, np.int32(n), *extra)[: k["n_params"]]
            fn((grid,), (32 * k["num_warps"],), params, shared_mem=k["shared"])
            cp.cuda.Device().synchronize()
            arrays[case] = cp.asnumpy(y)
            notes[cid] = "ok"
        except Exception as e:  # keep going: one failing case must not lose the others
            notes[cid] = f"run failed: {type(e).__name__}: {str(e)[:300]}"
        print(cid, notes[cid], flush=True)
    div = manifest.get("div")
    if div:  # fp32 `/` on the device vs the correctly rounded quotient (numpy's IEEE division)
        rng = np.random.default_rng(FP32_SEED + 1)
        nd = 1 << 20
        a = ((rng.random(nd) + 0.5) * np.exp2(rng.integers(-20, 20, nd))).astype(np.float32)
        b = ((rng.random(nd) + 0.5) * np.exp2(rng.integers(-20, 20, nd))).astype(np.float32)
        z = cp.zeros(nd, dtype=cp.float32)
        fn = cp.RawModule(path=str(ptxdir / div["ptx"])).get_function(div["name"])
        fn(((nd + manifest["block"] - 1) // manifest["block"],), (32 * div["num_warps"],),
           (cp.asarray(a), cp.asarray(b), z, np.int32(nd), np.uint64(0), np.uint64(0)), shared_mem=div["shared"])
        got = cp.asnumpy(z).view(np.int32).astype(np.int64)
        ref = (a / b).view(np.int32).astype(np.int64)
        ulp = np.abs(got - ref)
        notes["fp32_div"] = json.dumps({"n": nd, "instr": div["div"], "differ": int((ulp > 0).sum()),
                                        "max_ulp": int(ulp.max()), "hist": np.bincount(ulp).tolist()[:8]})
        print("fp32_div", notes["fp32_div"], flush=True)
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": f"python scripts/compile_fp8_target_ptx.py PTXDIR (Triton {manifest['triton']}, CPU); "
                   "python scripts/capture_fp8_target_tables.py PTXDIR OUT (GPU)",
        "device": props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]),
        "capability": [props["major"], props["minor"]],
        "cuda_driver": cp.cuda.runtime.driverGetVersion(),
        "cupy": cp.__version__, "numpy": np.__version__, "python": platform.python_version(),
        "triton_lowering": manifest["triton"], "fp32_seed": FP32_SEED, "seconds": round(time.time() - t0, 1),
    }
    for target, arrays in per_target.items():
        tmeta = dict(meta, target=target, notes={c: v for c, v in notes.items() if c.startswith(target + "/")},
                     cvt={c.split("/")[1]: k.get("cvt") for c, k in manifest["kernels"].items()
                          if c.startswith(target + "/")})
        np.savez_compressed(out / f"fp8_targets_{target}.npz", **arrays, fp32_inputs=inputs["fp32"],
                            meta=np.frombuffer(json.dumps(tmeta, sort_keys=True).encode(), dtype=np.uint8))
    (out / "fp8_targets.json").write_text(json.dumps(dict(meta, notes=notes), indent=1, sort_keys=True))
    print(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
