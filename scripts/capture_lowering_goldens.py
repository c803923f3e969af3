#!/usr/bin/env python
"""Capture the GPU's outputs of the everyday-pattern kernels (issue 38) as goldens: one ``.npz`` per pattern.

Run on a GPU machine with the Triton whose lowering is to be pinned (the image's 3.6):

    python scripts/capture_lowering_goldens.py --out /path/to/dir [--patterns layernorm,row_sum]

``--device cpu`` runs the same cases on the Triton interpreter instead (``TRITON_INTERPRET=1``), writing the same
files: a dry run of this script, and the interpreter's side to diff against the GPU's.

Each ``<pattern>.npz`` (deflated) holds, for every case ``C`` of ``tests.lowering.kernels.PATTERNS[pattern]``,
``C__sha256__<name>``, the digest of each whole output's raw bit patterns (``kernels.output_digest``), and
``C__out__<name>``, its leading part in full (``kernels.kept``: the first 512 elements), as raw bit patterns
(``uint16``/``uint32``/``int32``, so NaN payloads and signed zeros survive; the digest checks every element
within the golden dir's size budget, the kept part says where a difference is), and ``C__digest``, the sha256
of its inputs (``kernels.input_digest``: the inputs come from a fixed-seed CPU generator, drawn again on the CPU
lane and checked against it, so they need not be stored), plus
``cases`` (the case names), ``params`` (JSON per case) and ``meta`` (JSON: Triton / torch versions, device name,
capability, fp fusion setting). No pickle: every array is numeric or a unicode string array. The CPU lane reruns
the same kernels from ``tests/lowering/kernels.py`` and compares bit for bit.

``--compiled DIR`` (GPU) runs another Triton's compiled code instead of the installed Triton's: ``DIR`` is what
``scripts/compile_lowering_kernels.py`` wrote on a machine with that Triton (3.9, which the GPU image cannot
install). Each launch is looked up in ``DIR/manifest.json`` and refused unless its kernel, grid and specialization
(including the pointers' divisibility by 16) are the recorded ones and its parameters fit the PTX entry's; then the
recorded cubin runs through cupy with the launch's tensors (``tests.lowering.aot.Launcher``; the PTX, its
``.version`` lowered to 8.8, JIT-compiled by the driver only where the driver refuses the cubin). ``meta["triton"]``
is then the compiled code's version and ``meta["launcher"]`` says what ran, per kernel in ``meta["loaded"]``:

    python scripts/compile_lowering_kernels.py DIR                       # CPU, Triton 3.9
    python scripts/capture_lowering_goldens.py --compiled DIR --out golden/lowering/triton3.9   # GPU, needs cupy

Self-contained but for ``--compiled``: imports only torch, triton, numpy and the kernels module of this checkout
(``--compiled`` also cupy, ``tests.lowering.aot`` and the harness's specialization and patch layer).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
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
    """Rewrite each ``<pattern>.npz`` of ``out`` whose outputs are whole (or kept longer than :data:`KEPT
    <tests.lowering.kernels.KEPT>`) into the digest + kept form, keeping every other array (inputs' digest, cases,
    params, meta) as captured."""
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
            if not sep:
                continue
            if f"{case}__sha256__{name}" in arrays:  # already digested: its kept part cut to today's, if longer
                if arrays[key].size > kernels.KEPT:  # (a leading part of a leading part of the whole output)
                    arrays[key] = kernels.kept(arrays[key])
                    changed += 1
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
    ap.add_argument("--compiled", type=Path, default=None,
                    help="run the compiled kernels of this directory (scripts/compile_lowering_kernels.py) instead "
                         "of compiling with the installed Triton (cuda only)")
    ap.add_argument("--shrink", action="store_true",
                    help="rewrite the .npz files already in --out that hold whole outputs into the digest + kept "
                         "form (a capture of an earlier version of this script), running nothing")
    args = ap.parse_args(argv)
    if args.shrink:
        return _shrink(args.out)
    if "triton" in sys.modules:
        print("capture_lowering_goldens: import triton after choosing the device (run as a script)", file=sys.stderr)
        return 2
    if args.compiled is not None and args.device != "cuda":
        print("capture_lowering_goldens: --compiled runs compiled code on a GPU; it needs --device cuda",
              file=sys.stderr)
        return 2
    if args.compiled is not None and not (args.compiled / "manifest.json").is_file():
        print(f"capture_lowering_goldens: --compiled {args.compiled}: no manifest.json there (made by "
              f"scripts/compile_lowering_kernels.py)", file=sys.stderr)
        return 2
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    import torch
    import triton

    from tests.lowering import kernels

    if args.device == "cuda" and not torch.cuda.is_available():
        print("capture_lowering_goldens: no CUDA device (--device cpu runs the interpreter)", file=sys.stderr)
        return 2
    try:
        wanted = kernels.select(args.patterns)
    except ValueError as e:
        print(f"capture_lowering_goldens: {e}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    cuda = args.device == "cuda"
    meta: dict = {"triton": triton.__version__, "torch": torch.__version__,
            "device": torch.cuda.get_device_name() if cuda else "triton-interpreter",
            "capability": list(torch.cuda.get_device_capability()) if cuda else [],
            "TRITON_DEFAULT_FP_FUSION": os.environ.get("TRITON_DEFAULT_FP_FUSION", "")}
    with contextlib.ExitStack() as stack:
        launcher = _compiled(args.compiled, stack, meta) if args.compiled is not None else None
        for pattern in wanted:
            try:
                _capture(pattern, args, launcher, meta)
            except RuntimeError as e:  # tests.lowering.aot.LaunchMismatch: no golden from a launch not recorded
                if type(e).__name__ != "LaunchMismatch":
                    raise
                print(f"capture_lowering_goldens: {pattern}: refused, nothing written for it: {e}", file=sys.stderr)
                return 3
    return 0


def _compiled(directory: Path, stack: contextlib.ExitStack, meta: dict):  # noqa: ANN202 - a tests.lowering.aot.Launcher
    """The launcher of ``directory``'s compiled kernels, in place of ``JITFunction.run`` until ``stack`` closes;
    ``meta`` gets whose code runs."""
    import cupy as cp
    import torch
    import triton
    from triton.runtime.jit import JITFunction

    from harness.interp.patch import Patch
    from tests.lowering import aot

    torch.zeros(1, device="cuda")  # torch's context first: cupy then runs in the same (primary) context
    launcher = aot.Launcher(directory)
    m = launcher.manifest
    patch = stack.enter_context(Patch.context())
    aot.hook(patch, JITFunction, launcher)
    meta.update(triton=m["triton"], runtime_triton=triton.__version__, ptxas=m["ptxas"], arch=m["arch"],
                launcher=f"cupy cubin from Triton {m['triton']} ptxas {m['ptxas']}", cupy=cp.__version__,
                cuda_driver=cp.cuda.runtime.driverGetVersion(),
                TRITON_DEFAULT_FP_FUSION=m.get("TRITON_DEFAULT_FP_FUSION", ""),
                compiled_manifest_sha256=hashlib.sha256((directory / "manifest.json").read_bytes()).hexdigest())
    return launcher


def _capture(pattern: str, args: argparse.Namespace, launcher, meta: dict) -> None:  # noqa: ANN001 - aot.Launcher
    """Run every case of ``pattern`` (through ``launcher`` when given) and write ``<out>/<pattern>.npz``."""
    import numpy as np
    import torch

    from tests.lowering import kernels

    arrays: dict[str, np.ndarray] = {}
    names, params = [], []
    for case, p in kernels.PATTERNS[pattern]:
        inputs = kernels.make_inputs(pattern, p)
        if launcher is not None:
            launcher.begin(pattern, case)
        outs = kernels.launch(pattern, p, inputs, args.device)
        if launcher is not None:
            launcher.end()
        if args.device == "cuda":
            torch.cuda.synchronize()
        arrays[f"{case}__digest"] = np.array(kernels.input_digest(inputs))
        for k, v in outs.items():
            bits = _bits(v)
            arrays[f"{case}__sha256__{k}"] = np.array(kernels.output_digest(bits))
            arrays[f"{case}__out__{k}"] = kernels.kept(bits)
        names.append(case)
        params.append(json.dumps(p, sort_keys=True))
    if launcher is not None:  # which code ran, for this pattern's kernels
        keys = {e["key"] for launches in launcher.manifest["launches"][pattern].values() for e in launches}
        loaded = {launcher.manifest["kernels"][k]["cubin"]: launcher.loaded[k] for k in sorted(keys)}
        meta = dict(meta, loaded=loaded, jit_check=dict(launcher.jit_check))
        if any(v != "cubin" for v in loaded.values()):
            meta["launcher"] = (f"cupy, Triton {launcher.manifest['triton']}'s cubin where the driver loads it, "
                                f"else its PTX JIT-compiled by the driver (see loaded)")
    path = args.out / f"{pattern}.npz"
    np.savez_compressed(path, cases=np.array(names), params=np.array(params),
                        meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)
    print(f"{path}: {len(names)} cases", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
