"""Turn the H200 capture of ``tl.dot_scaled`` (``capture_dot_tables.py capture OUT --only scaled``) into golden files
(the only way they are made).

    python scripts/import_dot_scaled_tables.py CAPTURE_NPZ [--date 2026-12-04] [--command "..."]

For each case group (formats and kernel flags, ``dot_scaled_cases.group_of``: ``e2m1xe4m3``,
``e2m1xe2m1-fast``...) it writes ``golden/test_dot_scaled_h200/test_dot_scaled_is_the_h200s/<group>/out_bits.npz``:
int32 [outputs, 4], one stored output a row: (case index, m, n, the fp32 bits the H200 wrote there), every NaN as
0x7fffffff (NaN-ness is compared, never payloads). Which outputs (``dot_scaled_cases.stored_outputs``): (i, i) and
(i, (i + 64) % 128), which every row of a and column of b feeds, so every input element is checked, and the outputs
where a scale code 0 meets a scale >= 1 in the same K group. Why a subset: the whole capture is 3.8 MB and golden/
has a size budget.

The metadata carries the capture's own provenance (device, Triton, torch, the capture file's sha256, its command
and date), each case (its seed and flags, the digest of its inputs regenerated here, the PTX instructions the
capture saw), and the cases Triton refused to compile with the capture's error text. The cases must be those of
``tests/harness/tensor_cores/dot_scaled_cases.py`` (checked): the inputs are regenerated from it, and the compare
(``capture_dot_tables.py compare``, bit-exact on all 1,589,248 outputs under torch 2.13) is what shows the
regenerated inputs are the ones the H200 ran.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "harness" / "tensor_cores"))

from dot_scaled_cases import SCALED_CASES, group_of, inputs_digest, scaled_inputs, stored_outputs  # noqa: E402

from harness import __version__ as harness_version  # noqa: E402
from harness.golden.files import param_component, to_stored, write_golden  # noqa: E402

MODULE, TEST = "test_dot_scaled_h200", "test_dot_scaled_is_the_h200s"
GOLDEN = ROOT / "golden" / MODULE / TEST
NAN_BITS = 0x7FFFFFFF
CAPTURE_COMMAND = "python scripts/capture_dot_tables.py capture $OUT --only scaled --jobs 12"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("capture", type=Path, help="dot_scaled_tables.npz written by capture_dot_tables.py on the GPU")
    ap.add_argument("--date", default="2026-12-04", help="the capture's date (the npz does not record it)")
    ap.add_argument("--command", default=CAPTURE_COMMAND, help="the command that made the capture")
    args = ap.parse_args()
    raw = args.capture.read_bytes()
    z = np.load(args.capture, allow_pickle=False)
    cap = json.loads(str(z["meta"]))
    if cap.get("kind") != "dot_scaled":
        raise SystemExit(f"{args.capture}: not a tl.dot_scaled capture (meta kind {cap.get('kind')!r})")
    ours = {c["name"]: c for c in SCALED_CASES}
    ran = {c["name"]: c for c in cap["cases"]}
    if set(ran) | set(cap["errors"]) != set(ours) or set(ran) & set(cap["errors"]):
        raise SystemExit("the capture's cases are not dot_scaled_cases.SCALED_CASES: "
                         f"missing {sorted(set(ours) - set(ran) - set(cap['errors']))}, "
                         f"unknown {sorted(set(ran) | set(cap['errors']) - set(ours))}")
    for name, c in ran.items():
        if c != ours[name]:
            raise SystemExit(f"{name}: the capture ran {c}, dot_scaled_cases says {ours[name]}")
    provenance = {"device": cap["device"], "triton_version": cap["triton"], "torch_version": cap["torch"],
                  "capture": {"file": args.capture.name, "sha256": hashlib.sha256(raw).hexdigest(),
                              "bytes": len(raw), "date": args.date, "command": args.command}}
    groups: dict[str, list[dict]] = {}
    for c in SCALED_CASES:
        groups.setdefault(group_of(c), []).append(c)
    total = 0
    for gid, cases in groups.items():
        rows_out, kept, refused = [], [], []
        for c in cases:
            if c["name"] in cap["errors"]:
                refused.append({**c, "error": cap["errors"][c["name"]]})
                continue
            full = torch.from_numpy(z[c["name"]])
            if tuple(full.shape) != (c["M"], c["N"]) or full.dtype != torch.int32:
                raise SystemExit(f"{c['name']}: expected int32 {(c['M'], c['N'])} outputs; got {full.dtype} "
                                 f"{tuple(full.shape)}")
            inputs = scaled_inputs(c)
            r, q = stored_outputs(c, inputs)
            bits = full[r, q]
            bits = torch.where(torch.isnan(bits.view(torch.float32)), torch.tensor(NAN_BITS, dtype=torch.int32), bits)
            rows_out.append(torch.stack([torch.full_like(r, len(kept)), r, q, bits.to(torch.int64)], 1).to(torch.int32))
            kept.append({**c, "inputs_sha256": inputs_digest(inputs), "instr": cap["instr"][c["name"]]})
        t = torch.cat(rows_out) if rows_out else torch.zeros((0, 4), dtype=torch.int32)
        meta = {"name": "out_bits", "arch": "sm90", **provenance, "harness_version": harness_version,
                "test": {"module": MODULE, "test": TEST, "param": gid},
                "outputs": {"columns": ["case", "row", "col", "bits"],
                            "what": "one stored output a row: the index of its case in 'cases', its (m, n), and the "
                                    "fp32 bits (as int32) the H200 wrote there, NaN as 0x7fffffff; which outputs: "
                                    "dot_scaled_cases.stored_outputs"},
                "cases": kept, "refused": refused,
                "imported_by": "python scripts/import_dot_scaled_tables.py CAPTURE_NPZ"}
        data = write_golden(GOLDEN / param_component(gid) / "out_bits.npz", to_stored(t), meta)
        total += len(data)
        print(f"{gid:24s} {len(kept)} cases, {t.shape[0]:5d} outputs, {len(refused)} refused, {len(data):6d} bytes")
    print(f"{len(groups)} golden files, {total} bytes")


if __name__ == "__main__":
    main()
