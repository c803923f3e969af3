"""The ``tl.dot_scaled`` cases of the H200 capture and their inputs: the one definition that the capture
(``scripts/capture_dot_tables.py``), the golden import (``scripts/import_dot_scaled_tables.py``) and the test
(``test_dot_scaled_h200.py``) share.

Why here and not in the capture script: the goldens hold only outputs, so what they mean is this generator (each
case's inputs regenerated from its seed). It therefore lives beside the test that judges them, as a plain module
(``import dot_scaled_cases``: pytest puts each test file's directory on ``sys.path``); the scripts put this
directory on ``sys.path`` themselves. It imports only torch and numpy, never the harness, so the capture still runs
where the repo's dependencies are absent (it needs the checkout, which the capture machine gets anyway).

Cases (:data:`SCALED_CASES`): every operand-format pair (e2m1, e4m3, e5m2, bf16, fp16 on either side) with e8m0
scales, a 128x128 output over K = 256 in two ``BK = 128`` steps (64x64 tiles, 4 warps), from zeros or a loaded
accumulator; inputs ``finite`` (finite codes, scale codes 121..133), ``special`` (every code: NaN/inf operands),
``allscales`` (finite codes, scale codes 0..255); plus e2m1 packed along M/N, ``fast_math`` and unscaled
operands. Changing anything here changes the inputs the goldens were captured from: the goldens record each
case's input digest (:func:`inputs_digest`) so that such a change fails as what it is.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

__all__ = ["FP8", "PACK", "SCALED_CASES", "SCALED_FORMATS", "group_of", "inputs_digest", "k_step", "scaled_inputs",
           "specials", "stored_outputs"]

FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
SCALED_FORMATS = ("e2m1", "e4m3", "e5m2", "bf16", "fp16")
#: values a byte holds (e2m1: two codes, low nibble first)
PACK = {"e2m1": 2}
#: the case flags that change the compiled kernel besides the formats, as group-id suffixes
_VARIANTS = (("mpackA", "kpa", False), ("npackB", "kpb", False), ("fast", "fast", True), ("noscaleA", "sa", False),
             ("noscaleB", "sb", False))


def _scaled_case(a, b, acc, dist, seed, kpa=True, kpb=True, fast=False, sa=True, sb=True) -> dict:
    name = f"scaled_{a}x{b}_{dist}_{'acc' if acc else 'noacc'}"
    name += "".join(t for t, on in (("_mpackA", not kpa), ("_npackB", not kpb), ("_fast", fast), ("_noscaleA", not sa),
                                    ("_noscaleB", not sb)) if on)
    return dict(name=name, a=a, b=b, M=128, N=128, K=256, BM=64, BN=64, BK=128, warps=4, acc=acc, dist=dist,
                seed=seed, kpa=kpa, kpb=kpb, fast=fast, sa=sa, sb=sb)


def _scaled_cases() -> list[dict]:
    out, s = [], 5000
    for a in SCALED_FORMATS:
        for b in SCALED_FORMATS:
            for dist, acc in (("finite", False), ("finite", True), ("special", True), ("allscales", True)):
                s += 1
                out.append(_scaled_case(a, b, acc, dist, s))
    for kw in (dict(kpa=False), dict(kpb=False), dict(kpa=False, kpb=False)):
        s += 1
        out.append(_scaled_case("e2m1", "e2m1", True, "finite", s, **kw))
    for a, b in (("e2m1", "e2m1"), ("e4m3", "fp16")):
        s += 1
        out.append(_scaled_case(a, b, True, "allscales", s, fast=True))
    unscaled = (("e2m1", "bf16", dict(sb=False)), ("bf16", "e4m3", dict(sa=False)), ("e5m2", "fp16", dict(sb=False)))
    for a, b, kw in unscaled:
        s += 1
        out.append(_scaled_case(a, b, True, "special", s, **kw))
    return out


SCALED_CASES = _scaled_cases()


def group_of(c: dict) -> str:
    """The case's group: its formats and the flags that change the kernel (``e2m1xe2m1-fast``); one golden file
    and one test item each."""
    return f"{c['a']}x{c['b']}" + "".join(f"-{tag}" for tag, key, on in _VARIANTS if c[key] == on)


def specials(dt: torch.dtype) -> torch.Tensor:
    """The special values the capture mixes in: +-0, +-tiny, +-max, +-1, +-inf and NaN (e4m3fn: no inf), and the
    smallest subnormal (FP8) or tiny / 8."""
    fi = torch.finfo(dt)
    v = [0.0, -0.0, fi.tiny, -fi.tiny, fi.max, -fi.max, 1.0, -1.0, float("inf"), float("-inf"), float("nan")]
    if dt in FP8.values():
        v.append(float(torch.tensor(1, dtype=torch.uint8).view(dt).float()))  # smallest subnormal
        if dt == torch.float8_e4m3fn:
            v = [x for x in v if x == x and abs(x) != float("inf")] + [float("nan")]
    else:
        v.append(fi.tiny / 8)
    return torch.tensor(v, dtype=torch.float32).to(dt)


def _scaled_operand(g: torch.Generator, fmt: str, shape, dist: str) -> torch.Tensor:
    """Operand storage as the kernel loads it: e2m1 as packed bytes (shape already halved), fp8 as bytes, 16-bit
    formats as their dtype."""
    n = int(np.prod(shape))
    if fmt in ("bf16", "fp16"):
        dt = torch.bfloat16 if fmt == "bf16" else torch.float16
        x = torch.randn(n, generator=g) * torch.exp2(torch.randint(-6, 7, (n,), generator=g).float())
        if dist == "special":
            sp = specials(dt).float()
            pick = torch.rand(n, generator=g) < 0.002
            x = torch.where(pick, sp[torch.randint(0, sp.numel(), (n,), generator=g)], x)
        return x.to(dt).reshape(shape)
    c = torch.randint(0, 256, (n,), generator=g, dtype=torch.int64)
    if dist != "special" and fmt in ("e4m3", "e5m2"):
        dt = FP8[fmt]
        bad = ~torch.isfinite(c.to(torch.uint8).view(dt).float())
        c = torch.where(bad, c & 0x80, c)  # specials -> ±0
    return c.to(torch.uint8).reshape(shape)


def scaled_inputs(c: dict):
    """(a, a_scale, b, b_scale, acc) of a dot_scaled case on the CPU, from its seed: a [M, K] (e2m1: [M, K/2], or
    [M/2, K] packed along M), b [K, N] likewise, scales [M, K/32] / [N, K/32] uint8 or None, acc fp32 or None."""
    g = torch.Generator().manual_seed(c["seed"])
    M, N, K = c["M"], c["N"], c["K"]
    pa, pb = PACK.get(c["a"], 1), PACK.get(c["b"], 1)
    a_shape = (M, K // pa) if c["kpa"] else (M // pa, K)
    b_shape = (K // pb, N) if c["kpb"] else (K, N // pb)
    a = _scaled_operand(g, c["a"], a_shape, c["dist"])
    b = _scaled_operand(g, c["b"], b_shape, c["dist"])

    def scales(rows):
        if c["dist"] == "allscales":
            return torch.randint(0, 256, (rows, K // 32), generator=g, dtype=torch.int64).to(torch.uint8)
        return torch.randint(121, 134, (rows, K // 32), generator=g, dtype=torch.int64).to(torch.uint8)

    sa, sb = scales(M), scales(N)
    acc = torch.randn((M, N), generator=g) * 16 if c["acc"] else None
    return a, (sa if c["sa"] else None), b, (sb if c["sb"] else None), acc


def k_step(c: dict, inputs, k0: int) -> tuple:
    """The tile's operands of the kernel's K step at ``k0`` (``inputs``: the case's :func:`scaled_inputs`):
    (a, a_scale, b, b_scale) as ``dot_scaled`` takes them, e2m1 sliced in packed bytes along K (or whole rows when
    packed along M/N), scales by groups of 32, None for an unscaled operand."""
    a, sa, b, sb, _ = inputs
    bk, pa, pb = c["BK"], PACK.get(c["a"], 1), PACK.get(c["b"], 1)
    a_k = a[:, k0 // pa:(k0 + bk) // pa] if c["kpa"] else a[:, k0:k0 + bk]
    b_k = b[k0 // pb:(k0 + bk) // pb] if c["kpb"] else b[k0:k0 + bk]
    s_a = None if sa is None else sa[:, k0 // 32:(k0 + bk) // 32]
    s_b = None if sb is None else sb[:, k0 // 32:(k0 + bk) // 32]
    return a_k, s_a, b_k, s_b


def inputs_digest(inputs) -> str:
    """sha256 over the bytes of a case's regenerated inputs (None skipped), in :func:`scaled_inputs`' order."""
    h = hashlib.sha256()
    for t in inputs:
        if t is not None:
            h.update(t.contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def stored_outputs(c: dict, inputs) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, cols) of the outputs a golden keeps of case ``c`` (``inputs``: its :func:`scaled_inputs`), in row-major
    order. Why these: (i, i) and (i, (i + N/2) % N) for i < M, which every row of a and every column of b (with
    their scales) feeds, so every input element is checked with 256 of the 16,384 outputs; and every (i, j) where a
    K group pairs scale code 0 on one operand with a code >= 128 (a scale >= 1) on the other: code 0 is where the
    lowerings differ (bf16: +0 on Triton 3.6, 2^-127 on 3.9), and only against a large scale can it reach an fp32
    output past the accumulator (in the full capture 39 outputs tell the two rules apart, none on the diagonals)."""
    M, N = c["M"], c["N"]
    if M != N:
        raise ValueError(f"stored_outputs: expected a square output (M = N); got M={M}, N={N}")
    keep = torch.zeros((M, N), dtype=torch.bool)
    i = torch.arange(M)
    keep[i, i] = True
    keep[i, (i + N // 2) % N] = True
    _, sa, _, sb, _ = inputs
    if sa is not None and sb is not None:
        x, y = sa.to(torch.int64)[:, None, :], sb.to(torch.int64)[None, :, :]
        keep |= (((x == 0) & (y >= 128)) | ((y == 0) & (x >= 128))).any(-1)
    rows, cols = keep.nonzero(as_tuple=True)
    return rows, cols
