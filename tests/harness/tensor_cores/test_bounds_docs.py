"""docs/tensor-cores.md's tables are the data: the model table is rendered from harness.tensor_cores.MODELS and the
bound table from error_bound, so the doc cannot drift from the code. On a mismatch the failure prints the table
to paste (between the doc's ``<!-- ... -->`` markers)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.tensor_cores import MODELS, error_bound, scaled_error_bound

DOC = Path(__file__).resolve().parents[3] / "docs" / "tensor-cores.md"

#: Which Triton versions a row holds for, by how it is known: a measured row was captured with Triton 3.6 on the
#: H200, and Triton 3.9's PTX for sm90 emits the same instructions (docs/MEASUREMENTS.md, 2026-12-04); a published
#: row is the hardware's numerics, whatever Triton emits the instruction.
HOLDS_FOR = {True: "3.6 (H200); 3.9 (same instructions in its PTX)",
             False: "any (hardware numerics, not measured here)"}
_OPERANDS = {"fp8": "e4m3 / e5m2 (any pair)", "tf32": "fp32 (input_precision tf32)"}
#: (arch, operands, instr, extra) rows of the bound table, K = 128 / 4096
BOUND_ROWS = [
    ("sm90", "e4m3", "wgmma", {}),
    ("sm90", "e4m3", "wgmma", {"max_num_imprecise_acc": 32}),
    ("sm90", "e4m3", "mma", {}),
    ("sm90", "bf16", "wgmma", {}),
    ("sm90", "fp16", "wgmma", {}),
    ("sm90", "fp32", "wgmma", {"input_precision": "tf32"}),
    ("sm90", "fp32", "wgmma", {"input_precision": "tf32x3"}),
    ("sm90", "fp32", "wgmma", {"input_precision": "ieee"}),
    ("sm80", "bf16", "mma", {}),
    ("sm80", "fp32", "mma", {"input_precision": "tf32"}),
    ("sm80", "e5m2", "mma", {}),
    ("sm89", "e4m3", "mma", {}),
    ("sm100", "e4m3", "mma", {}),
    ("sm100", "bf16", "tcgen05", {}),
    ("sm100", "fp32", "tcgen05", {"input_precision": "tf32"}),
    ("sm100", "fp32", "tcgen05", {"input_precision": "tf32x3"}),
    ("sm100", "e4m3", "tcgen05", {}),
]
#: (operands, scale, group) rows of sm100's native block-scaled tiles (scaled_error_bound), K = 128 / 4096
SCALED_ROWS = [("e2m1", "e8m0", 32), ("e2m1", "e8m0", 16), ("e2m1", "ue4m3", 16), ("e4m3", "e8m0", 32)]


def models_table() -> str:
    lines = ["| arch | operands | instruction | k | fraction bits aligned | kept | min exp | known by | Triton "
             "| source |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (arch, kind, instr), r in MODELS.items():
        lines.append(f"| {arch} | {_OPERANDS.get(kind, kind)} | {instr} | {r.nfma} | {r.frac} | {r.frac_out} | "
                     f"{r.min_exp} | {r.provenance} | {HOLDS_FOR[r.measured]} | "
                     f"{r.source} |")
    return "\n".join(lines)


def bounds_table() -> str:
    lines = ["| arch | operands | instruction | options | alpha, K=128 | alpha, K=4096 | beta, K=4096 |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for arch, dt, instr, kw in BOUND_ROWS:
        b128 = error_bound(arch, dt, dt, 128, instr=instr, **kw)
        b4k = error_bound(arch, dt, dt, 4096, instr=instr, **kw)
        opts = ", ".join(f"{k}={v}" for k, v in kw.items()) or "-"
        lines.append(f"| {arch} | {dt} | {instr} | {opts} | {b128.alpha:.3g} | {b4k.alpha:.3g} | {b4k.beta:.3g} |")
    for dt, scale, group in SCALED_ROWS:
        b128, b4k = (scaled_error_bound("sm100", dt, dt, K, scale=scale, group=group) for K in (128, 4096))
        instr = b128.note.split("tcgen05.mma ")[1].split(" k=")[0]
        lines.append(f"| sm100 | {dt}, {scale} scales / {group} | tcgen05 {instr} | - | {b128.alpha:.3g} | "
                     f"{b4k.alpha:.3g} | {b4k.beta:.3g} |")
    return "\n".join(lines)


def _section(text: str, name: str) -> str:
    m = re.search(rf"<!-- {name} begin -->\n(.*?)\n<!-- {name} end -->", text, re.S)
    if m is None:
        pytest.fail(f"{DOC}: no '<!-- {name} begin -->' ... '<!-- {name} end -->' block")
    return m.group(1)


@pytest.mark.parametrize(("name", "render"), [("models", models_table), ("bounds", bounds_table)])
def test_doc_table_is_the_data(name, render):
    want = render()
    got = _section(DOC.read_text(encoding="utf-8"), name)
    assert got == want, f"{DOC.name}'s {name} table differs from the data; paste this between its markers:\n{want}"
