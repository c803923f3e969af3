"""Generated kernels against the GPU: their outputs captured on a CUDA device, then compared bit for bit with what
the plugin's interpreter computes for the same kernels and inputs on a CPU (and with Triton's own interpreter,
to show what the models change).

Why two steps, each a function of its own: the capture needs the GPU (a lent machine, minutes), the comparison
only a CPU (it also runs on the GPU machine, in a child process with ``TRITON_INTERPRET=1``). A capture is a
directory: ``meta.json`` (seeds, versions, device) and one ``<seed>.npz`` per case with the kernel's source, its
inputs and outputs as raw bits (no pickle), or the error it raised. The comparison regenerates each case from
its seed and refuses a capture whose kernel source differs (written by another version of the grammar).

What "bit-exact" means here: every output element's bits equal the GPU's. NaNs whose payloads differ are counted
apart (``nan payload``): the GPU writes its canonical NaN where the interpreter keeps numpy's.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.fuzz import kernelgen

__all__ = ["FORMAT", "Row", "Tally", "capture", "compare", "load_capture"]

FORMAT = 1
_META = "meta.json"


def _npbits(t: Any) -> Any:
    from harness.fuzz.differential import bits

    return bits(t).numpy()


def capture(seeds: Iterable[int], out: str | Path, device: str = "cuda",
            progress: Callable[[str], None] | None = None) -> Path:
    """Run each seed's case on ``device`` (a CUDA device; ``"cpu"`` runs Triton's interpreter, for a dry run)
    and write the capture directory ``out`` (created; an existing capture there is refused, never overwritten)."""
    import numpy as np
    import torch
    import triton

    interpreting = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    if device != "cpu" and interpreting:
        raise ValueError("capture: device is CUDA but TRITON_INTERPRET is set: the kernels would run on the "
                         "interpreter; unset it (python -m harness fuzz --gpu does)")
    if device == "cpu" and not interpreting:
        raise ValueError("capture: device 'cpu' runs Triton's interpreter: set TRITON_INTERPRET=1 first")
    if device != "cpu" and not torch.cuda.is_available():
        raise ValueError(f"capture: device {device!r} asked for, but torch sees no CUDA device")
    out = Path(out)
    if (out / _META).exists():
        raise FileExistsError(f"capture: out {str(out)!r} already holds a capture ({_META}); name a new directory")
    out.mkdir(parents=True, exist_ok=True)
    seeds = list(seeds)
    src_dir = out / "kernels"
    src_dir.mkdir(exist_ok=True)
    t0 = time.monotonic()
    for i, seed in enumerate(seeds):
        case = kernelgen.generate(seed)
        arrays: dict[str, Any] = {"source": np.array(case.source)}
        for name, t in case.tensors.items():
            arrays[f"in__{name}"] = _npbits(t)
        try:
            kernel = kernelgen.load_kernel(case, src_dir)
            args = case.args(device)
            kernel[case.grid](*args, **case.constexprs, num_warps=case.num_warps)
            if device != "cpu":
                torch.cuda.synchronize()
            names = list(case.tensors)
            for name in case.outputs:
                arrays[f"out__{name}"] = _npbits(args[names.index(name)])
            arrays["outcome"] = np.array("ran")
        except Exception as e:  # noqa: BLE001 - a kernel the GPU refuses is an outcome
            msg = str(e)  # a CompilationError's reason is at its end, after the source it quotes
            arrays["outcome"] = np.array(f"raised {type(e).__name__}: "
                                         f"{msg if len(msg) <= 600 else msg[:200] + ' ... ' + msg[-400:]}")
        np.savez_compressed(out / f"{seed}.npz", **arrays)
        if progress and (i + 1) % 200 == 0:
            progress(f"captured {i + 1} of {len(seeds)} ({time.monotonic() - t0:.0f} s)")
    name = torch.cuda.get_device_name() if device != "cpu" else "Triton interpreter (CPU)"
    cap = list(torch.cuda.get_device_capability()) if device != "cpu" else None
    (out / _META).write_text(json.dumps({
        "format": FORMAT, "seeds": seeds, "device": name, "capability": cap, "triton": triton.__version__,
        "torch": torch.__version__, "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "seconds": round(time.monotonic() - t0, 1),
    }, indent=1))
    return out


def load_capture(directory: str | Path) -> dict[str, Any]:
    """A capture's ``meta.json``, checked: a clear error for a directory that holds none, or another format."""
    d = Path(directory)
    if not d.is_dir():
        raise FileNotFoundError(f"compare: capture {str(d)!r} is not a directory (python -m harness fuzz --gpu "
                                f"--out DIR writes one)")
    try:
        meta = json.loads((d / _META).read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"compare: capture {str(d)!r} has no {_META}: not a capture, or one cut short "
                                f"(the file is written last)") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"compare: capture {str(d)!r}: {_META} is not JSON ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or not isinstance(meta.get("seeds"), list):
        raise ValueError(f"compare: capture {str(d)!r}: {_META} is not format {FORMAT} with a seeds list")
    return meta


@dataclass
class Row:
    """One op class's counts: ``cases`` the GPU ran; of them, bit-exact under the plugin and under Triton's own
    interpreter, exact but for NaN payloads, and the ones the plugin could not run at all."""

    cases: int = 0
    plugin_exact: int = 0
    plain_exact: int = 0
    plugin_nan_payload: int = 0
    plugin_raised: int = 0
    smallest: tuple[int, int, str] | None = None  # (lines, seed, report) of the smallest kernel that differs


@dataclass
class Tally:
    """A comparison's result: rows by op class, the cases the GPU refused, and the capture's meta."""

    meta: dict[str, Any]
    arch: str
    rows: dict[str, Row] = field(default_factory=lambda: defaultdict(Row))
    gpu_refused: Counter[str] = field(default_factory=Counter)

    def table(self) -> str:
        """A markdown table: share bit-exact by op class, plugin against Triton's own interpreter."""
        m = self.meta
        head = (f"{len(m['seeds'])} generated kernels (seeds {m['seeds'][0]}..{m['seeds'][-1]}) on {m['device']} "
                f"(Triton {m['triton']}, torch {m['torch']}, {m['date']}), compared with the interpreter as "
                f"{self.arch}")
        lines = [head, "", "| op class | GPU ran | plugin bit-exact | + NaN payload only | plugin raised | "
                 "Triton's interpreter bit-exact |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
        total = Row()
        for cls in sorted(self.rows):
            r = self.rows[cls]
            lines.append(_row(cls, r))
            for k in ("cases", "plugin_exact", "plain_exact", "plugin_nan_payload", "plugin_raised"):
                setattr(total, k, getattr(total, k) + getattr(r, k))
        lines.append(_row("**all**", total))
        if self.gpu_refused:
            lines.append("")
            lines.append("The GPU's Triton refused: " + ", ".join(f"{c} {n}" for c, n in
                                                                  sorted(self.gpu_refused.items())))
        return "\n".join(lines)

    def smallest(self) -> str:
        """The smallest kernel of each class whose plugin bits differ from the GPU's, with what differs."""
        out = []
        for cls in sorted(self.rows):
            s = self.rows[cls].smallest
            if s:
                out.append(f"## {cls}: seed {s[1]}\n\n{s[2]}")
        return "\n\n".join(out)


def _pct(n: int, d: int) -> str:
    return f"{n} ({100.0 * n / d:.1f}%)" if d else "0"


def _row(cls: str, r: Row) -> str:
    return (f"| {cls} | {r.cases} | {_pct(r.plugin_exact, r.cases)} | {_pct(r.plugin_nan_payload, r.cases)} | "
            f"{r.plugin_raised} | {_pct(r.plain_exact, r.cases)} |")


def compare(directory: str | Path, arch: str = "sm90",
            progress: Callable[[str], None] | None = None) -> Tally:
    """Compare a capture with the interpreter of this process, which must be interpreting
    (``TRITON_INTERPRET=1`` before Triton's import) with the plugin's shims installed for ``arch``."""
    import numpy as np
    import torch

    from harness.fuzz.differential import differences, outcome_text, plain_interpreter, quiet, run_case

    if os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        raise ValueError("compare: set TRITON_INTERPRET=1 before Triton is imported: the comparison runs the "
                         "kernels on the interpreter")
    meta = load_capture(directory)
    d = Path(directory)
    tally = Tally(meta, arch)
    src_dir = d / "interp-kernels"
    src_dir.mkdir(exist_ok=True)
    t0 = time.monotonic()
    for i, seed in enumerate(meta["seeds"]):
        path = d / f"{seed}.npz"
        case = kernelgen.generate(int(seed))
        with np.load(path, allow_pickle=False) as z:
            stored = {k: z[k] for k in z.files}
        if str(stored["source"]) != case.source:
            raise ValueError(f"compare: seed {seed}: the captured kernel is not the one this checkout's kernelgen "
                             f"writes for it (captured by another version of the grammar): recapture")
        if not str(stored["outcome"]).startswith("ran"):
            tally.gpu_refused[case.op_class] += 1
            continue
        for name, t in list(case.tensors.items()):
            case.tensors[name] = _from_bits(stored[f"in__{name}"], t, torch)
        gpu = {n: _from_bits(stored[f"out__{n}"], case.tensors[n], torch) for n in case.outputs}
        row = tally.rows[case.op_class]
        row.cases += 1
        kernel = kernelgen.load_kernel(case, src_dir)
        with quiet():
            plugin = run_case(kernel, case)
            with plain_interpreter():
                plain = run_case(kernel, case)
        if isinstance(plugin, BaseException):
            row.plugin_raised += 1
            shown = [outcome_text(plugin)]
        else:
            shown = []  # what differs beyond NaN payloads
            if not differences(gpu, plugin, nan_equal=False):
                row.plugin_exact += 1
            else:
                shown = differences(gpu, plugin, nan_equal=True)
                row.plugin_nan_payload += not shown
        if not isinstance(plain, BaseException) and not differences(gpu, plain, nan_equal=False):
            row.plain_exact += 1
        if shown:
            size = (case.source.count("\n"), int(seed))
            if row.smallest is None or size < row.smallest[:2]:
                row.smallest = (*size, f"{case.describe()}\nmodels: {sorted(case.models) or 'none'}\n\n"
                                       f"```python\n{case.source}```\n\nGPU vs plugin: " + "; ".join(shown))
        if progress and (i + 1) % 200 == 0:
            progress(f"compared {i + 1} of {len(meta['seeds'])} ({time.monotonic() - t0:.0f} s)")
    return tally


def _from_bits(arr: Any, like: Any, torch: Any) -> Any:
    """A tensor of ``like``'s dtype and shape from stored bits."""
    return torch.from_numpy(arr.copy()).view(like.dtype).reshape(like.shape)
