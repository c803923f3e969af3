"""Turn the H200 capture of ``capture_fp8_target_tables.py`` into golden files (the only way they are made).

    python scripts/import_fp8_target_tables.py CAPTURE_DIR [--targets sm80,sm89,sm90] [--suffix -t3.9]

For each target and source dtype it writes ``golden/test_fp8_targets/test_encode_matches_target_table/
<target>-<src>/codes.npz``: uint8 codes, one row per (format, via fp32) case in the row order the metadata lists;
the fp32 sample is not stored (the test draws it again from its seed, ``capture_fp8_target_tables.fp32_sample``);
each target file's must have the digest ``FP32_SHA256`` (checked before its tables are written). The metadata
carries the capture's own (device, date, driver, Triton whose lowering was compiled, command, refused cases). Only
the ``aligned`` variant is imported: it is what a launch with torch tensors compiles to, and the capture found the
unaligned one identical on every case (the script checks that and refuses otherwise).

``--suffix`` imports the tables of another Triton's lowering beside the first ones (``<target>-<src>-t3.9``):
the fp32 sample is the same seed and digest.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.golden.files import to_stored, write_golden  # noqa: E402
from scripts.capture_fp8_target_tables import is_captured_sample  # noqa: E402

GOLDEN = ROOT / "golden" / "test_fp8_targets" / "test_encode_matches_target_table"
SRCS = ("fp16", "bf16", "fp32")


def rows_for(src: str) -> list[str]:
    vias = ("", "_via_fp32") if src != "fp32" else ("",)
    return [f"{src}{v}_{fmt}" for fmt in ("e4nv", "e5m2", "e4b15") for v in vias]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("capture", type=Path)
    ap.add_argument("--targets", default="sm80,sm89,sm90")
    ap.add_argument("--suffix", default="", help="param id suffix for another Triton's tables, e.g. -t3.9")
    ap.add_argument("--note", default="", help="what else the metadata should say about the capture")
    args = ap.parse_args()
    for target in args.targets.split(","):
        z = np.load(args.capture / f"fp8_targets_{target}.npz", allow_pickle=False)
        cap_meta = json.loads(z["meta"].tobytes().decode())
        # checked before any of its tables is written: each target file's sample is the one the tests draw
        if not is_captured_sample(z["fp32_inputs"]):
            raise SystemExit(f"{target}: the capture's fp32 sample is not the one of FP32_SHA256 "
                             "(capture_fp8_target_tables.py): its tables would not be checked on the sample the "
                             "test draws")
        for src in SRCS:
            rows, codes, refused = [], [], {}
            for case in rows_for(src):
                a, u = f"{case}_aligned", f"{case}_unaligned"
                if a not in z.files:
                    refused[case] = cap_meta["notes"].get(f"{target}/{a}", "missing")
                    continue
                if u in z.files and not np.array_equal(z[a], z[u]):
                    raise SystemExit(f"{target}/{case}: aligned and unaligned tables differ; import both")
                rows.append(case)
                codes.append(z[a])
            meta = {k: cap_meta[k] for k in ("date", "command", "device", "capability", "cuda_driver", "cupy",
                                             "triton_lowering", "fp32_seed")}
            meta.update(name="codes", arch=target, target=target, src=src, rows=rows, refused=refused,
                        harness_version="0.1.0", test={"module": "test_fp8_targets",
                                                       "test": "test_encode_matches_target_table",
                                                       "param": f"{target}-{src}{args.suffix}"},
                        imported_by="python scripts/import_fp8_target_tables.py CAPTURE_DIR")
            if args.note:
                meta["note"] = args.note
            t = torch.from_numpy(np.stack(codes)) if codes else torch.zeros((0, 0), dtype=torch.uint8)
            write_golden(GOLDEN / f"{target}-{src}{args.suffix}" / "codes.npz", to_stored(t), meta)
            print(target, src, rows, "refused:", sorted(refused))


if __name__ == "__main__":
    main()
