"""``harness.tensor_cores.dot_scaled`` is bit for bit what the H200 computes for ``tl.dot_scaled`` (issue 26), against
H200 goldens.

The goldens (golden/test_dot_scaled_h200, written only by ``scripts/import_dot_scaled_tables.py`` from the H200
capture of ``scripts/capture_dot_tables.py capture OUT --only scaled``, Triton 3.6.0; the capture's device,
versions, sha256 and command are in each file's metadata) hold, per case, 256 of its 128x128 outputs: (i, i) and
(i, (i + 64) % 128), as int32 bits with every NaN as 0x7fffffff. Every row of a and every column of b, with their
scales, feeds one of them, so every input element is checked (:func:`test_every_pair_feeds_enough_inputs`). The
inputs are regenerated from each case's seed by ``dot_scaled_cases`` (the capture's own generator).

The model runs for exactly the stored outputs: output (i, j) needs row i of a and column j of b only, so each
group's outputs are gathered into one batch ``[P, 1, BK] x [P, BK, 1]`` and ``dot_scaled`` runs once per ``BK``
step with the accumulator chained, as the kernel's loop does (:func:`test_a_batch_of_outputs_is_the_tile` checks
that this equals evaluating the tile). The lowering is the capture's Triton (the golden's ``triton_version``), not
the installed one, so the Triton 3.9 and 3.6 lanes check the same thing. No kernel runs: lane-independent.
"""

from __future__ import annotations

import pytest
import torch
from dot_scaled_cases import SCALED_CASES, group_of, inputs_digest, k_step, scaled_inputs, stored_outputs

from harness.tensor_cores import DotScaledRefused, dot_scaled

pytestmark = [pytest.mark.harness_op("tl_dot_scaled"), pytest.mark.lane_independent]

NAN_BITS = 0x7FFFFFFF
GROUPS: dict[str, list[dict]] = {}
for _c in SCALED_CASES:
    GROUPS.setdefault(group_of(_c), []).append(_c)
#: shown per failure: the first mismatching outputs
SHOWN = 6


@pytest.fixture(autouse=True)
def _one_thread():
    """One intra-op thread while these run: the tensors are small, and a second thread only spins (this file: 1 s
    of CPU with one thread, 19 s with two on the 2-core box while other jobs ran, 2026-12-04)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _bits(x: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isnan(x), torch.tensor(NAN_BITS, dtype=torch.int32), x.view(torch.int32))


def _gather(c: dict, inputs: tuple, rows: torch.Tensor, cols: torch.Tensor, k0: int) -> tuple:
    """The operands of outputs (rows[p], cols[p]) for the K step at k0: a [P, 1, BK], b [P, BK, 1] (e2m1: packed
    along K), scales [P, 1, BK/32] or None."""
    a, sa, b, sb = k_step(c, inputs, k0)
    return (a[rows][:, None], None if sa is None else sa[rows][:, None], b[:, cols].T[:, :, None],
            None if sb is None else sb[cols][:, None])


def _model(cases: list[dict], inputs: list[tuple], outs: list[tuple[torch.Tensor, torch.Tensor]],
           triton: str) -> torch.Tensor:
    """dot_scaled for the outputs ``outs[n] = (rows, cols)`` of each case n, concatenated (fp32): one batched call
    per BK step. The cases share formats and flags; a case without an accumulator starts from +0, as the kernel's
    ``tl.zeros`` does."""
    c0 = cases[0]
    acc = torch.cat([torch.zeros(r.numel()) if x[4] is None else x[4][r, q]
                     for x, (r, q) in zip(inputs, outs, strict=True)])[:, None, None]
    for k0 in range(0, c0["K"], c0["BK"]):
        parts = [_gather(c, x, r, q, k0) for c, x, (r, q) in zip(cases, inputs, outs, strict=True)]
        a, sa, b, sb = (None if p[0] is None else torch.cat(p) for p in zip(*parts, strict=True))
        acc = dot_scaled(a, sa, c0["a"], b, sb, c0["b"], acc, fast_math=c0["fast"], a_k_pack=c0["kpa"],
                         b_k_pack=c0["kpb"], triton=triton)
    return acc.flatten()


def _refused_here(c: dict, triton: str) -> None:
    """The case's first K step through the model (raises DotScaledRefused where the compiler refused it)."""
    inputs = scaled_inputs(c)
    a, sa, b, sb = k_step(c, inputs, 0)
    dot_scaled(a, sa, c["a"], b, sb, c["b"], inputs[4], fast_math=c["fast"], a_k_pack=c["kpa"], b_k_pack=c["kpb"],
               triton=triton)


@pytest.mark.parametrize("group", list(GROUPS))
def test_dot_scaled_is_the_h200s(group, golden):
    gold, meta = golden.load("out_bits")
    assert meta["device"] == "NVIDIA H200" and meta["arch"] == "sm90" and meta["test"]["param"] == group, meta
    triton = meta["triton_version"]
    ours = {c["name"]: c for c in GROUPS[group]}
    golden_cases = meta["cases"] + meta["refused"]
    assert sorted(c["name"] for c in golden_cases) == sorted(ours), "the golden's cases are not dot_scaled_cases'"
    for c in golden_cases:
        extra = {k: c[k] for k in c if k not in ours[c["name"]]}
        assert {k: v for k, v in c.items() if k not in extra} == ours[c["name"]], (
            f"{c['name']}: the golden was captured with {c}, dot_scaled_cases now says {ours[c['name']]}")
    # what Triton refused to compile for the H200, the model refuses
    for c in meta["refused"]:
        with pytest.raises(DotScaledRefused, match="does not compile for sm90"):
            _refused_here(c, triton)
    cases = meta["cases"]
    if not cases:
        assert meta["refused"], "a golden with neither outputs nor refusals"
        return
    inputs = [scaled_inputs(c) for c in cases]
    changed = [c["name"] for c, x in zip(cases, inputs, strict=True) if inputs_digest(x) != c["inputs_sha256"]]
    assert not changed, (f"the inputs regenerated from the seeds differ from those at import ({changed}): "
                         f"dot_scaled_cases or torch's generator changed, so these goldens no longer apply")
    assert gold.dtype == torch.int32 and gold.dim() == 2 and gold.shape[1] == 4, (gold.dtype, tuple(gold.shape))
    which, rows, cols, want = gold.unbind(1)
    outs = []
    for n, (c, x) in enumerate(zip(cases, inputs, strict=True)):
        r, q = rows[which == n], cols[which == n]
        rule = stored_outputs(c, x)
        assert torch.equal(r, rule[0]) and torch.equal(q, rule[1]), f"{c['name']}: not the outputs stored_outputs keeps"
        outs.append((r, q))
    assert torch.equal(which, torch.cat([torch.full_like(r, n) for n, (r, _) in enumerate(outs)])), "rows out of order"
    got = _model(cases, inputs, outs, triton)
    bad = _bits(got) != want
    where = bad.nonzero().flatten().tolist()[:SHOWN]
    assert not bad.any(), (
        f"{int(bad.sum())} / {bad.numel()} outputs differ from the H200's (Triton {triton} lowering); first: "
        + "; ".join(f"{cases[int(which[p])]['name']} (m, n) = ({int(rows[p])}, {int(cols[p])}): "
                    f"model={got[p].item()!r} h200={want[p:p + 1].view(torch.float32).item()!r}" for p in where))


def test_every_pair_feeds_enough_inputs(golden):
    """Each format pair the H200 ran feeds >= 10^5 input elements (operand values, scale codes, accumulator
    values) into stored outputs, every row of a and column of b among them; the pairs it did not run are refused
    in every case."""
    fed: dict[str, int] = {}
    refused: dict[str, int] = {}
    for group, ours in GROUPS.items():
        pair = f"{ours[0]['a']}x{ours[0]['b']}"
        gold, meta = golden.load("out_bits", test="test_dot_scaled_is_the_h200s", param=group)
        for n, c in enumerate(meta["cases"]):
            mine = gold[gold[:, 0] == n]
            rows, cols = set(mine[:, 1].tolist()), set(mine[:, 2].tolist())
            assert rows == set(range(c["M"])) and cols == set(range(c["N"])), c["name"]
            k = c["K"]
            n_in = c["M"] * k + c["N"] * k + (c["M"] * k // 32 if c["sa"] else 0) + (c["N"] * k // 32 if c["sb"] else 0)
            n_in += mine.shape[0] if c["acc"] else 0
            fed[pair] = fed.get(pair, 0) + n_in
        if meta["refused"]:
            refused[pair] = refused.get(pair, 0) + len(meta["refused"])
    low = {p: n for p, n in fed.items() if n < 10**5}
    assert not low, f"pairs below 10^5 input elements: {low}"
    formats = {c["a"] for c in SCALED_CASES}
    assert set(fed) | set(refused) == {f"{a}x{b}" for a in formats for b in formats}
    assert set(refused) - set(fed) == {"bf16xfp16", "fp16xbf16"}, refused  # Triton 3.6 compiles no bf16 x fp16


@pytest.mark.parametrize("name", ["scaled_e2m1xe5m2_allscales_acc", "scaled_fp16xe4m3_special_acc",
                                  "scaled_e2m1xbf16_special_acc_noscaleB"])
def test_a_batch_of_outputs_is_the_tile(name):
    """The batched evaluation of single outputs equals the model of a 16x16 tile of them (each output's chain
    depends only on its row, its column and its accumulator), with specials and scale codes 0..255 in play."""
    c = next(x for x in SCALED_CASES if x["name"] == name)
    x = scaled_inputs(c)
    T = 16
    tile = x[4][:T, :T].clone()
    for k0 in range(0, c["K"], c["BK"]):
        a, sa, b, sb = k_step(c, x, k0)
        tile = dot_scaled(a[:T], None if sa is None else sa[:T], c["a"], b[:, :T], None if sb is None else sb[:T],
                          c["b"], tile, triton="3.6")
    rows, cols = torch.arange(T).repeat_interleave(T), torch.arange(T).repeat(T)
    got = _model([c], [x], [(rows, cols)], "3.6").reshape(T, T)
    bad = _bits(got) != _bits(tile)
    assert not bad.any(), f"{int(bad.sum())} / {bad.numel()} outputs differ; first at {bad.nonzero().tolist()[:SHOWN]}"
