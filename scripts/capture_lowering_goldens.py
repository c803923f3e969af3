#!/usr/bin/env python
"""Capture the GPU's outputs of the everyday-pattern kernels (issue 38) as goldens: one ``.npz`` per pattern.

Run on a GPU machine with the Triton whose lowering is to be pinned (the image's 3.6):

    python scripts/capture_lowering_goldens.py --out /path/to/dir [--patterns layernorm,row_sum]

``--device cpu`` runs the same cases on the Triton interpreter instead (``TRITON_INTERPRET=1``), writing the same
files: a dry run of this script, and the interpreter's side to diff against the GPU's.

Each ``<pattern>.npz`` (deflated) holds, for every case ``C`` of ``tests.lowering.kernels.PATTERNS[pattern]``,
``C__sha256__<name>``, the digest of each whole output's raw bit patterns (``kernels.output_digest``), and
``C__out__<name>``, its leading part in full (``kernels.kept``: rows up to 2,048 elements), as raw bit patterns
(``uint16``/``uint32``/``int32``, so NaN payloads and signed zeros survive; the digest checks every element
within the golden dir's size budget, the kept part says where a difference is), and ``C__digest``, the sha256
of its inputs (``kernels.input_digest``: the inputs come from a fixed-seed CPU generator, drawn again on the CPU
lane and checked against it, so they need not be stored), plus
``cases`` (the case names), ``params`` (JSON per case) and ``meta`` (JSON: Triton / torch versions, device name,
capability, fp fusion setting). No pickle: every array is numeric or a unicode string array. The CPU lane reruns
the same kernels from ``tests/lowering/kernels.py`` and compares bit for bit.

Self-contained: imports only torch, triton, numpy and the kernels module of this checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _bits(t):  # noqa: ANN001, ANN202 - torch tensor in, numpy array out
    import torch

    t = t.detach().cpu().contiguous()
    view = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16,
            torch.int32: torch.int32, torch.int64: torch.int64}[t.dtype]
    arr = t.view(view).numpy()
    return arr.view({4: "uint32", 2: "uint16", 8: "int64"}[arr.itemsize]) if t.dtype != torch.int32 else arr


def _shrink(out: Path) -> int:
    """Rewrite each ``<pattern>.npz`` of ``out`` whose outputs are whole into the digest + kept form, keeping
    every other array (inputs' digest, cases, params, meta) as captured."""
    import numpy as np

    from tests.lowering import kernels

    files = sorted(out.glob("*.npz")) if out.is_dir() else []
    if not files:
        print(f"capture_lowering_goldens: --shrink: no .npz files in {out}", file=sys.stderr)
        return 2
    for path in files:
        z = np.load(path, allow_pickle=False)
        arrays = {k: z[k] for k in z.files}
        changed = 0
        for key in list(arrays):
            case, sep, name = key.partition("__out__")
            if not sep or f"{case}__sha256__{name}" in arrays:
                continue
            arrays[f"{case}__sha256__{name}"] = np.array(kernels.output_digest(arrays[key]))
            arrays[key] = kernels.kept(arrays[key])
            changed += 1
        if changed:
            np.savez_compressed(path, **arrays)
        print(f"{path}: {changed} outputs shrunk")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path, help="directory for the .npz files (created)")
    ap.add_argument("--patterns", default="", help="comma-separated subset of the patterns (default: all)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cuda: the GPU (goldens); cpu: the Triton interpreter (dry run)")
    ap.add_argument("--shrink", action="store_true",
                    help="rewrite the .npz files already in --out that hold whole outputs into the digest + kept "
                         "form (a capture of an earlier version of this script), running nothing")
    args = ap.parse_args(argv)
    if args.shrink:
        return _shrink(args.out)
    if "triton" in sys.modules:
        print("capture_lowering_goldens: import triton after choosing the device (run as a script)", file=sys.stderr)
        return 2
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    import numpy as np
    import torch
    import triton

    from tests.lowering import kernels

    if args.device == "cuda" and not torch.cuda.is_available():
        print("capture_lowering_goldens: no CUDA device (--device cpu runs the interpreter)", file=sys.stderr)
        return 2
    wanted = [p for p in args.patterns.split(",") if p] or list(kernels.PATTERNS)
    unknown = sorted(set(wanted) - set(kernels.PATTERNS))
    if unknown:
        print(f"capture_lowering_goldens: unknown patterns {unknown}; known: {sorted(kernels.PATTERNS)}",
              file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    cuda = args.device == "cuda"
    meta = {"triton": triton.__version__, "torch": torch.__version__,
            "device": torch.cuda.get_device_name() if cuda else "triton-interpreter",
            "capability": list(torch.cuda.get_device_capability()) if cuda else [],
            "TRITON_DEFAULT_FP_FUSION": os.environ.get("TRITON_DEFAULT_FP_FUSION", "")}
    for pattern in wanted:
        arrays: dict[str, np.ndarray] = {}
        names, params = [], []
        for case, p in kernels.PATTERNS[pattern]:
            inputs = kernels.make_inputs(pattern, p)
            outs = kernels.launch(pattern, p, inputs, args.device)
            if cuda:
                torch.cuda.synchronize()
            arrays[f"{case}__digest"] = np.array(kernels.input_digest(inputs))
            for k, v in outs.items():
                bits = _bits(v)
                arrays[f"{case}__sha256__{k}"] = np.array(kernels.output_digest(bits))
                arrays[f"{case}__out__{k}"] = kernels.kept(bits)
            names.append(case)
            params.append(json.dumps(p, sort_keys=True))
        path = args.out / f"{pattern}.npz"
        np.savez_compressed(path, cases=np.array(names), params=np.array(params), meta=np.array(json.dumps(meta)),
                            **arrays)
        print(f"{path}: {len(names)} cases")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
