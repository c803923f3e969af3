"""Turboquant k8v4 store goldens: every dtype case, two shapes, captured on the H200 (sm90).

Each slot is split into fields, each compared by its own rule. Inputs are rebuilt from the node-id seed,
which the golden records: renaming the test or a param changes the seed (and orphans the files).

GPU lane: ``golden.check``, bit-exact on the generating arch. Interpreter lane (CPU CI): reads the H200
goldens and never writes them (a regen on a CPU box must not replace hardware codes with interpreter ones);
value nibbles, scale and zero bit-exact (fp32 with div_rn on both lanes); key codes bit-exact too with the
plugin's GPU-exact interpreter casts (the default), else within the measured ``*.own_casts`` interp rows
(the interpreter's own casts differ from the H200's on 2-6% of codes). Every lane: the golden's key codes
are ``harness.fp8.encode`` of the inputs for the golden's arch, bit for bit — the golden and the hardware model agree.
"""

import pytest
import torch

from harness.compare import assert_close_tol, assert_fp8_close
from harness.fp8 import encode
from harness.interp import casts as interp_casts

SHAPES = {"t37-h2-d128-b16": (37, 2, 128, 16), "t21-h3-d96-b32": (21, 3, 96, 32)}
NAMES = ("key_codes", "value_nibbles", "scale_zero")
H200 = "sm90"  # the interp rows were measured against goldens of this arch


def _store(shape, dtype_case, rng, device):
    """(keys of the stored tokens, {golden name: field of their slots}) for the seeded inputs."""
    from kernels.turboquant import slot_bytes, tq_store_k8v4
    from kernels.turboquant.layout import value_bytes

    tokens, heads, d, block = SHAPES[shape]
    num_blocks = (tokens + block - 1) // block + 1
    # keys mostly inside the e4b15 range, a few beyond it (they saturate); values with a per-vector offset
    key = (0.6 * torch.randn(tokens, heads, d, generator=rng)).to(dtype_case.src)
    value = torch.randn(tokens, heads, d, generator=rng) * 3 + torch.randn(tokens, heads, 1, generator=rng)
    value = value.to(dtype_case.src)
    perm = torch.randperm(num_blocks * block, generator=rng)[:tokens]
    perm[::7] = -1  # skipped tokens
    cache = torch.zeros(num_blocks, block, heads, slot_bytes(d), dtype=torch.uint8).to(device)
    tq_store_k8v4(key.to(device), value.to(device), cache, perm.to(device), fp8_format=dtype_case.fmt.name)
    slots = cache.cpu().reshape(num_blocks * block, heads, slot_bytes(d))[perm[perm >= 0]]
    vb = value_bytes(d)
    return key[perm >= 0], {
        "key_codes": slots[..., :d].contiguous(),
        "value_nibbles": slots[..., d : d + vb].contiguous(),
        "scale_zero": slots[..., d + vb : d + vb + 4].contiguous().view(torch.float16),
    }


def _load(golden, seed):
    """This test's goldens ({name: tensor}, FP8 as uint8 codes) and the arch they were generated on."""
    out, archs = {}, set()
    for name in NAMES:
        t, meta = golden.load(name)
        assert meta.get("seed") == seed, (
            f"golden {name!r} was generated from seed {meta.get('seed')} ({meta.get('test', {}).get('nodeid')}); "
            f"this test's seed is {seed}: the inputs differ (test or param renamed, or --harness-seed set?)"
        )
        out[name] = t.view(torch.uint8) if meta.get("fmt") else t
        archs.add(meta.get("arch"))
    assert len(archs) == 1, f"this test's goldens come from different arches: {sorted(map(str, archs))}"
    return out, archs.pop()


def _nibbles(packed):
    return torch.stack([packed & 0xF, packed >> 4], -1).flatten(-2).float()


def _interp_vs_h200(got, gold, fmt, case, tolerance):
    # the plugin makes the interpreter's casts the H200's (exact); with --harness-interp-casts=off they are the
    # interpreter's own, held to the rows measured for those
    ops = ("golden/tq.store.key_codes",) if interp_casts.active_target() is not None else (
        "golden/tq.store.key_codes.own_casts", "golden/tq.store.key_codes_differ.own_casts")
    for op in ops:
        assert_fp8_close(got["key_codes"], gold["key_codes"], fmt, tol=tolerance(op), op=op, dtype=case)
    exact = tolerance("exact")
    assert_close_tol(
        _nibbles(got["value_nibbles"]), _nibbles(gold["value_nibbles"]), exact, op="golden/tq.store.value_nibbles",
        dtype=case,
    )
    assert_close_tol(
        got["scale_zero"].float(), gold["scale_zero"].float(), exact, op="golden/tq.store.scale_zero", dtype=case
    )
    assert torch.equal(got["scale_zero"].view(torch.int16), gold["scale_zero"].view(torch.int16)), (
        "scale/zero equal in value but not in bits (signed zero)"
    )


@pytest.mark.harness_op("tq.store")
@pytest.mark.dtype_cases(fmt=["e4nv", "e4b15"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_store_golden(shape, dtype_case, rng, seed, device, harness_arch, golden, tolerance):
    fmt = dtype_case.fmt.name
    key, got = _store(shape, dtype_case, rng, device)
    if harness_arch.kind == "interp":
        gold, gen = _load(golden, seed)
        assert gen == H200, f"the interp rows were measured against {H200} goldens; these come from {gen}"
        _interp_vs_h200(got, gold, fmt, dtype_case.id, tolerance)
    else:
        for name in NAMES:
            golden.check(name, got[name], fmt=fmt if name == "key_codes" else None)
        gold, gen = _load(golden, seed)  # after check: under regen the file just written
    model = encode(key, fmt, arch=gen, via=torch.float32)
    assert_fp8_close(gold["key_codes"], model, fmt, op="golden/tq.store.key_model", dtype=dtype_case.id)
    assert torch.equal(gold["key_codes"], model), "golden key codes and the model differ in the sign of a zero"
