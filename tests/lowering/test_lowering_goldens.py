"""The everyday-pattern kernels of issue 38 on the interpreter lane reproduce the GPU's outputs bit for bit; on the
GPU lane, the GPU reproduces its own capture (a regression check of the card, the driver and the compiled code).

The goldens are what ``scripts/capture_lowering_goldens.py`` writes on a GPU (per output the sha256 of its whole
bit patterns and its leading rows in full, and a digest of the inputs, one ``.npz`` per pattern):
``golden/lowering/<pattern>.npz`` and, for another Triton version's lowering,
``golden/lowering/triton<major.minor>/<pattern>.npz``. The file whose capture ran the installed Triton's version
is the one checked: the compiled order differs between versions
(:data:`harness.lowering.reduce_order.RULES`), so a golden of another version says nothing about this lane. Without
one, the pattern is skipped with the command that captures it.

On the interpreter, a case whose outputs differ and whose launch the shims warned about (an op not modelled, with
the reason) is an expected failure naming the warning; a difference nothing warned about fails. On the GPU every
case must match: the shims' warnings and ``KNOWN_OPEN`` are the interpreter's.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from tests.lowering import kernels  # noqa: E402 - needs triton

_CAPTURE = ("python scripts/capture_lowering_goldens.py --out golden/lowering{sub} --patterns {pattern} (on an "
            "H100/H200 with Triton {version})")


#: Cases the H100 capture shows the model does not reproduce yet, by Triton minor version and pattern, with the
#: measured difference: a strict expected failure (the test fails when any other case differs, and when these
#: stop differing, so the entry is removed).
KNOWN_OPEN: dict[str, dict[str, set[str]]] = {}
_OPEN_WHY: dict[str, str] = {}


def _mm(version: str) -> str:
    return ".".join(str(version).split(".")[:2])


def _bits(t: torch.Tensor) -> np.ndarray:
    """As the capture stores it (``capture_lowering_goldens._bits``): the raw bit patterns."""
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.int32:
        return t.numpy()
    view = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16,
            torch.int64: torch.int64}[t.dtype]
    arr = t.view(view).numpy()
    return arr.view({4: "uint32", 2: "uint16", 8: "int64"}[arr.itemsize])


def _golden_file(golden, pattern: str):  # noqa: ANN001, ANN202 - the golden fixture in, an open npz out
    here = _mm(triton.__version__)
    found = []
    # every version's capture of the pattern is read (its meta says which Triton it pins), so none is "unused"
    # on a lane whose version it is not
    others = sorted(p.parent.name for p in golden.external(f"lowering/{pattern}.npz").parent.glob(
        f"triton*/{pattern}.npz") if p.parent.name != f"triton{here}")
    rels = (f"lowering/triton{here}/{pattern}.npz", f"lowering/{pattern}.npz",
            *(f"lowering/{d}/{pattern}.npz" for d in others))
    for rel, path in [(rel, golden.external(rel)) for rel in rels]:
        if path.is_file():
            z = np.load(path, allow_pickle=False)
            captured = _mm(json.loads(str(z["meta"]))["triton"])
            if captured == here:
                return z, rel
            found.append(f"{rel} (Triton {captured})")
    sub = f"/triton{here}" if found else ""
    have = f"only {', '.join(found)}: another version's order" if found else "no golden"
    pytest.skip(f"{pattern}: {have} for Triton {here}; capture with " +
                _CAPTURE.format(sub=sub, pattern=pattern, version=here))


@pytest.mark.parametrize("pattern", sorted(kernels.PATTERNS))
def test_lane_reproduces_the_gpu(golden, pattern, device):
    z, rel = _golden_file(golden, pattern)
    meta = json.loads(str(z["meta"]))
    if meta.get("device") == "triton-interpreter":
        pytest.fail(f"{rel} was written by --device cpu (the interpreter), not a GPU: it is no golden")
    differ: list[str] = []
    explained: list[str] = []
    for case in [str(c) for c in z["cases"]]:
        p, inputs = kernels.inputs_from_golden(z, pattern, case)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            outs = kernels.launch(pattern, p, inputs, device)
        # the shims' warnings explain an interpreter's difference, never a GPU's
        said = sorted({str(w.message) for w in seen if str(w.message).startswith("harness: interpreter op")}
                      if device == "cpu" else ())
        for name, t in outs.items():
            got = _bits(t)
            if kernels.output_digest(got) == str(z[f"{case}__sha256__{name}"]):
                continue
            want, mine = z[f"{case}__out__{name}"], kernels.kept(got)
            if mine.shape != want.shape or mine.dtype != want.dtype:
                line = (f"{case}/{name}: shape/dtype {got.shape} {got.dtype}, the golden's kept part {want.shape} "
                        f"{want.dtype}")
            else:
                line = (f"{case}/{name}: differs from {meta.get('device')} ({int(np.count_nonzero(mine != want))} of "
                        f"the {want.size} leading outputs the golden keeps)")
            (explained if said else differ).append(line + (f" (warned: {said[0]})" if said else ""))
    open_cases = KNOWN_OPEN.get(_mm(triton.__version__), {}).get(pattern, set()) if device == "cpu" else set()
    if open_cases:
        still = {line.split("/", 1)[0] for line in differ}
        if still == open_cases:
            pytest.xfail(f"{rel}: {_OPEN_WHY[pattern]}:\n  " + "\n  ".join(differ))
        if not still:
            pytest.fail(f"{rel}: {sorted(open_cases)} now match the GPU: remove them from KNOWN_OPEN")
    if differ and device != "cpu":
        pytest.fail(f"{rel}: this GPU differs from the capture's {meta.get('device')}:\n  " + "\n  ".join(differ))
    if differ:
        pytest.fail(f"{rel}: the interpreter differs from the GPU where nothing warned:\n  " + "\n  ".join(differ))
    if explained:
        pytest.xfail(f"{rel}: differs where the shims said they do not model an op:\n  " + "\n  ".join(explained))
