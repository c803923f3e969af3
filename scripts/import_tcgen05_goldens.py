"""Import the published B200 ``tcgen05.mma`` result words as goldens: ``golden/test_tcgen05_b200/published.npz``.

Source: the public repository ``sf-tensor/tcgen05`` (MIT), ``tcgen05_model/validation.py`` at commit
8fce64d82eea9d1f4bae1a42b979aae851210810: raw D words its authors captured on an NVIDIA B200, each for an input
vector that the file states as a seeded ``random.Random`` draw (or literally). This script restates those input
recipes (seed, element draw, K, order of draws: a, then b, then c, then the scales) and the published words; it
runs none of that repository's code and computes no expected value. The words are figures: published, validated
on B200 by its authors, not measured here. The harness's evaluator (``harness.tensor_cores.tcgen05``) is tested
against them in ``tests/harness/tensor_cores/test_tcgen05.py``.

    python scripts/import_tcgen05_goldens.py [OUT]   (default golden/test_tcgen05_b200/published.npz)

Each vector: ``name``, ``model`` (the published model family: a format name, ``nvfp4``, ``mxf8f6f4-e2m1``,
``mxf4-2x``, ``mxf4nvf4-2x``/``-4x``, ``i8-*``, ``mixed-e2m1-e4m3-f16``), ``k``, the operand words ``a``/``b``
(uint32 containers, zero-padded to 64), ``c`` (uint32), scale bytes ``sa``/``sb`` (4 each; ``scaled`` says whether
the vector has scales) and ``expected`` (the B200 word).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np

COMMIT = "8fce64d82eea9d1f4bae1a42b979aae851210810"
SOURCE = f"github.com/sf-tensor/tcgen05 @ {COMMIT}: tcgen05_model/validation.py (B200 words, published)"


def _f32_finite(rng: random.Random) -> int:
    """A random fp32 word with its exponent field cleared where it would be inf/NaN (the source's recipe)."""
    w = rng.getrandbits(32)
    return w & 0x807FFFFF if (w >> 23) & 0xFF == 0xFF else w


def vectors():
    """(name, model, k, a, b, c, scales or None, expected word) in the source's order."""
    # unscaled: (format, K, seed, element draw, two published words)
    draws = {"tf32": _f32_finite, "bf16": _f32_finite, "f16": lambda r: r.getrandbits(16),
             "e4m3": lambda r: r.randrange(0x7F), "e5m2": lambda r: r.randrange(0x7C),
             "e2m3": lambda r: r.randrange(0x40), "e3m2": lambda r: r.randrange(0x40),
             "e2m1": lambda r: r.randrange(0x10)}
    unscaled = (("tf32", 8, 104, (0xFF800000, 0xFC347E7C)), ("bf16", 16, 104, (0x7F800000, 0x7F800000)),
                ("f16", 16, 103, (0x7FFFFFFF, 0x49776BBA)), ("e4m3", 32, 104, (0xEC63D12A, 0x452AF963)),
                ("e5m2", 32, 300, (0x4D92B09A, 0x4C9C1102)), ("e2m3", 32, 301, (0xC29DD800, 0x449D14C1)),
                ("e3m2", 32, 302, (0x52C9EC63, 0xC33B7700)), ("e2m1", 32, 303, (0xC1FE0000, 0xDC3B62A3)))
    for fmt, k, seed, words in unscaled:
        rng = random.Random(seed)
        for i, w in enumerate(words):
            a = [draws[fmt](rng) for _ in range(k)]
            b = [draws[fmt](rng) for _ in range(k)]
            yield f"{fmt}-{i}", fmt, k, a, b, _f32_finite(rng), None, w
    ints = (("u8", "u8", "wrap", 500, 0x078A5C64), ("s8", "u8", "wrap", 501, 0xF66E2FA6),
            ("u8", "s8", "wrap", 502, 0xD73F1A46), ("s8", "s8", "sat", 503, 0x8063D12F),
            ("s8", "s8", "wrap", 504, 0xA4679E93), ("u8", "u8", "sat", 505, 0x55DB8BB8),
            ("s8", "u8", "sat", 506, 0xB47F6330), ("u8", "s8", "sat", 507, 0x8533C14D))
    for ta, tb, mode, seed, w in ints:
        rng = random.Random(seed)
        a = [rng.randrange(256) for _ in range(32)]
        b = [rng.randrange(256) for _ in range(32)]
        yield f"i8-{ta}-{tb}-{mode}", f"i8-{ta}-{tb}-{mode}", 32, a, b, _f32_finite(rng), None, w
    rng = random.Random(700)
    for i, w in enumerate((0x4429730B, 0xC30545D3)):
        a = [rng.randrange(16) for _ in range(64)]
        b = [rng.randrange(16) for _ in range(64)]
        c = _f32_finite(rng)
        sa = [rng.randrange(0x77) for _ in range(4)]
        sb = [rng.randrange(0x77) for _ in range(4)]
        yield f"nvfp4-{i}", "nvfp4", 64, a, b, c, (sa, sb), w
    rng = random.Random(910)
    a = [rng.randrange(16) for _ in range(32)]
    b = [rng.randrange(16) for _ in range(32)]
    sa = [rng.randrange(115, 140), 0x7F, 0x7F, 0x7F]
    sb = [rng.randrange(115, 140), 0x7F, 0x7F, 0x7F]
    yield "mxf8f6f4-e2m1", "mxf8f6f4-e2m1", 32, a, b, 0, (sa, sb), 0x3F094000
    for kind, vec, seed, n, w in (("mxf4", 2, 920, 2, 0x46BA8000), ("mxf4nvf4", 2, 921, 2, 0x40580000),
                                  ("mxf4nvf4", 4, 922, 4, 0xC6A88896)):
        rng = random.Random(seed)
        a = [rng.randrange(16) for _ in range(64)]
        b = [rng.randrange(16) for _ in range(64)]
        sa = [rng.randrange(115, 140) for _ in range(n)] + [0x7F] * (4 - n)
        sb = [rng.randrange(115, 140) for _ in range(n)] + [0x7F] * (4 - n)
        yield f"{kind}-{vec}x", f"{kind}-{vec}x", 64, a, b, 0, (sa, sb), w
    # labelled edge vectors: (format, K, one, smallest subnormal, NaN, inf, published subnormal result)
    edges = (("tf32", 8, 0x3F800000, 0x00002000, 0x7FC00000, 0x7F800000, 0x00002000),
             ("bf16", 16, 0x3F800000, 0x00010000, 0x7FC00000, 0x7F800000, 0x00010000),
             ("f16", 16, 0x3C00, 0x0001, 0x7E00, 0x7C00, 0x33800000),
             ("e4m3", 32, 0x38, 0x01, 0x7F, None, 0x3B000000),
             ("e5m2", 32, 0x3C, 0x01, 0x7F, 0x7C, 0x37800000))
    for fmt, k, one, sub, nan, inf, sub_word in edges:
        def first(x, y, c=0, k=k):
            return [x] + [0] * (k - 1), [y] + [0] * (k - 1), c
        yield (f"{fmt}-negative-zero", fmt, k, *first(0, 0, 0x80000000), None, 0)
        yield (f"{fmt}-minimum-subnormal", fmt, k, *first(sub, one), None, sub_word)
        yield (f"{fmt}-nan", fmt, k, *first(nan, one), None, 0x7FFFFFFF)
        if inf is not None:
            yield (f"{fmt}-infinity", fmt, k, *first(inf, one), None, 0x7F800000)
            yield (f"{fmt}-infinity-times-zero", fmt, k, *first(inf, 0), None, 0x7FFFFFFF)
    for fmt, k in (("tf32", 8), ("bf16", 16)):
        yield (f"{fmt}-low-payload-pretruncate", fmt, k, [0x7F800001] + [0] * (k - 1),
               [0x3F800000] + [0] * (k - 1), 0, None, 0x7F800000)
    yield "nvfp4-scale-nan", "nvfp4", 64, [1] * 64, [1] * 64, 0, ([0x7F, 0x38, 0x38, 0x38], [0x38] * 4), 0x7FFFFFFF
    carry_a = bytes.fromhex("0e 0e 0b 06 00 08 0f 09 0a 0b 03 09 0f 07 0e 00 "
                            "02 06 01 05 0a 08 06 04 07 0c 06 0b 01 0c 06 0d "
                            "0b 0b 08 06 0c 08 0c 05 00 04 01 0f 01 06 0f 05 "
                            "02 04 06 05 0a 07 0b 07 00 01 0a 0d 0b 0f 0e 07")
    carry_b = bytes.fromhex("06 0c 0b 02 08 09 0b 04 03 0d 02 09 09 0c 01 08 "
                            "07 02 06 03 0d 02 09 0a 05 09 0f 05 0a 08 06 00 "
                            "08 0d 0d 02 0c 0c 05 02 08 03 04 0f 0f 01 01 0a "
                            "0b 0a 05 0b 0f 03 0b 0e 0a 05 07 01 01 07 08 0a")
    yield ("nvfp4-k4-product-carry", "nvfp4", 64, list(carry_a), list(carry_b), 0x094E5986,
           ([0x09, 0x7C, 0x6D, 0x44], [0x07, 0x78, 0x26, 0x79]), 0x49FCAFB7)
    yield ("mxf8f6f4-scale-nan", "mxf8f6f4-e2m1", 32, [1] * 32, [1] * 32, 0, ([0xFF, 0x7F, 0x7F, 0x7F], [0x7F] * 4),
           0x7FFFFFFF)
    yield ("mixed-e2m1-e4m3-f16-input-nan", "mixed-e2m1-e4m3-f16", 32, [1] * 32, [0x7F] + [0] * 31, 0, None, 0x7FFF)
    yield "mixed-e2m1-e4m3-f16-c-nan", "mixed-e2m1-e4m3-f16", 32, [0] * 32, [0] * 32, 0x7E00, None, 0x7FFF
    # dense block-scaled all-zero products with c = -0: +0 (B200 canonicalises it)
    for model, k, s in (("mxf8f6f4-e4m3", 32, 0x7F), ("mxf8f6f4-e5m2", 32, 0x7F), ("mxf8f6f4-e2m3", 32, 0x7F),
                        ("mxf8f6f4-e3m2", 32, 0x7F), ("mxf8f6f4-e2m1", 32, 0x7F), ("mxf4-2x", 64, 0x7F),
                        ("mxf4nvf4-2x", 64, 0x7F), ("mxf4nvf4-4x", 64, 0x7F), ("nvfp4", 64, 0x38)):
        yield (f"{model}-negative-zero", model, k, [0] * k, [0] * k, 0x80000000, ([s] * 4, [s] * 4), 0)


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / \
        "golden/test_tcgen05_b200/published.npz"
    rows = list(vectors())
    n = len(rows)
    a = np.zeros((n, 64), np.uint32)
    b = np.zeros((n, 64), np.uint32)
    sa = np.zeros((n, 4), np.uint8)
    sb = np.zeros((n, 4), np.uint8)
    for i, (_, _, k, av, bv, _, sc, _) in enumerate(rows):
        a[i, :k], b[i, :k] = av, bv
        if sc is not None:
            sa[i], sb[i] = sc
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, name=np.array([r[0] for r in rows]), model=np.array([r[1] for r in rows]),
                        k=np.array([r[2] for r in rows], np.int32), a=a, b=b,
                        c=np.array([r[5] for r in rows], np.uint32), sa=sa, sb=sb,
                        scaled=np.array([r[6] is not None for r in rows]),
                        expected=np.array([r[7] for r in rows], np.uint32), source=np.array(SOURCE))
    print(f"{n} published B200 vectors -> {out}")


if __name__ == "__main__":
    main()
