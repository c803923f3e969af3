"""The tensor-core numerics as data: one :class:`BlockFMA` row per (arch, operand kind, instruction), each with
its source (measured on the H200 here, or published and not measured here). :mod:`.chain` evaluates them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BlockFMA", "MODELS", "EMIN", "model_for"]


@dataclass(frozen=True)
class BlockFMA:
    """One tensor-core instruction's numerics (see the module docstring)."""

    nfma: int         #: products per block: the instruction's k
    frac: int         #: fraction bits kept below the block's alignment exponent
    frac_out: int     #: fraction bits of the block result (truncated)
    min_exp: int      #: lower clamp of the alignment exponent
    source: str       #: where the numbers come from
    measured: bool    #: True: checked bit for bit on an H200 here; False: published, not measured here

    def __repr__(self) -> str:
        tag = "measured" if self.measured else "published, not measured here"
        return f"BlockFMA(k={self.nfma}, frac={self.frac}, frac_out={self.frac_out}, min_exp={self.min_exp}; {tag})"


_KM = "Khattak & Mikaitis, arXiv 2512.07004, toolbox models/{}.m"
_H200_DOT = "H200, plain Triton 3.6 tl.dot (scripts/capture_dot_tables.py, docs/MEASUREMENTS.md 2026-12-04)"
_H200_CHECKED = ("; checked bit for bit on the H200: plain Triton 3.6 tl.dot, {} (scripts/capture_dot_tables.py and "
                 "golden/test_dot_h200, docs/MEASUREMENTS.md 2026-12-04, evening)")

#: the instruction Triton emits, read from the PTX of tl.dot tiles (fp16, bf16, tf32, e4m3, e5m2; 128x128 and 64x64
#: with 4 warps, 16x64 w4, 64x64 w2) compiled for the target with Triton 3.6.0 and 3.9.0 on the CPU box
#: (scripts/compile_dot_scaled_lowering.py --plain, 2026-12-04)
_MMA_SYNC = ("; covers mma.sync m16n8k16 / m16n8k8 (the toolbox's B200 vectors ran through wmma::mma_sync), which "
             "Triton 3.6/3.9 emit on {} for tiles below a warpgroup (16x64 w4, 64x64 w2; compiled here)")
_SM120 = (_KM.format("RTXPRO6000TC") + "{}, which is B200TC: the toolbox's assignment for the RTX PRO 6000 Blackwell "
          "(sm_120), with no sm_120 validation vectors; Triton 3.6/3.9 emit mma.sync m16n8k16 / m16n8k8 on sm120 for "
          "every tile (compiled here)")

#: (arch, operand kind, instruction) -> the instruction's numerics. kind: fp16, bf16, tf32, fp8 (any pair of
#: e4m3/e5m2). instruction: "wgmma" (sm90 warpgroup MMA) or "mma" (mma.sync / HMMA).
MODELS: dict[tuple[str, str, str], BlockFMA] = {
    # FP8: mmaemu's "hopper" preset (k=32, 13 fraction bits, truncated; c in the alignment). mmaemu validated it
    # on cuBLAS FP8 GEMMs (H100); checked here against wgmma m64nNk32 of Triton's tl.dot on the H200.
    ("sm90", "fp8", "wgmma"): BlockFMA(32, 13, 13, -132, "mmaemu 0.1.0 preset 'hopper'; " + _H200_DOT
                                       + " and golden/test_dot_h200 (wgmma m64n64k32 / m64n32k32)", True),
    # fp16/bf16: H100 fma=16, neab=2 (25 fraction bits), rz, c aligned with the products, min_exp_limit -133;
    # published for H100, then checked on the H200 (random, wide-exponent and special inputs, acc or not)
    ("sm90", "fp16", "wgmma"): BlockFMA(16, 25, 23, -133, _KM.format("H100TC") + _H200_CHECKED.format(
        "wgmma m64n64k16 / m64n128k16 / m64n32k16"), True),
    ("sm90", "bf16", "wgmma"): BlockFMA(16, 25, 23, -133, _KM.format("H100TC") + _H200_CHECKED.format(
        "wgmma m64n64k16 / m64n128k16 / m64n32k16"), True),
    ("sm90", "tf32", "wgmma"): BlockFMA(8, 25, 23, -133, _KM.format("H100TC") + " (tf32: fma=8)" + _H200_CHECKED.format(
        "wgmma m64n64k8 / m64n32k8, input_precision tf32 and tf32x3"), True),
    # mma.sync on sm90: the same numerics (and FP8 tiles under mma.sync run this fp16 row, chain.py)
    ("sm90", "fp16", "mma"): BlockFMA(16, 25, 23, -133, _KM.format("H100TC") + " (wmma/HMMA)" + _H200_CHECKED.format(
        "mma.sync m16n8k16 (16x64 w4, 64x64 w2), fp16 and FP8 operands converted to fp16"), True),
    ("sm90", "bf16", "mma"): BlockFMA(16, 25, 23, -133, _KM.format("H100TC") + " (wmma/HMMA)" + _H200_CHECKED.format(
        "mma.sync m16n8k16 (16x64 w4, 64x64 w2)"), True),
    ("sm90", "tf32", "mma"): BlockFMA(8, 25, 23, -133, _KM.format("H100TC") + " (tf32: fma=8)" + _H200_CHECKED.format(
        "mma.sync m16n8k8 (16x64 w4, 64x64 w2), tf32 and tf32x3"), True),
    # A100: fma=8, neab=1 (24 fraction bits), rz; tf32 fma=4 (Fasi et al. 2021 for the 8-term fp16 block)
    ("sm80", "fp16", "mma"): BlockFMA(8, 24, 23, -133, _KM.format("A100TC"), False),
    ("sm80", "bf16", "mma"): BlockFMA(8, 24, 23, -133, _KM.format("A100TC"), False),
    ("sm80", "tf32", "mma"): BlockFMA(4, 24, 23, -133, _KM.format("A100TC") + " (tf32: fma=4)", False),
    # Ada FP8 mma.sync m16n8k32: mmaemu's "ada" preset (validated by mmaemu on an RTX 4060, not here)
    ("sm89", "fp8", "mma"): BlockFMA(16, 13, 13, -132, "mmaemu 0.1.0 preset 'ada' (RTX 4060)", False),
    # B200 (sm100): fma=16, neab=2 (25 fraction bits), rz, c aligned with the products, min_exp_limit -133; tf32
    # fma=8. Fitted by the authors to B200 outputs of wmma::mma_sync (HMMA), so it covers the mma.sync that Triton
    # gives tl.dot on sm100 below a warpgroup tile (16x64 w4, 64x64 w2), not tcgen05.mma (no row: see model_for)
    ("sm100", "fp16", "mma"): BlockFMA(16, 25, 23, -133, _KM.format("B200TC") + _MMA_SYNC.format("sm100"), False),
    ("sm100", "bf16", "mma"): BlockFMA(16, 25, 23, -133, _KM.format("B200TC") + _MMA_SYNC.format("sm100"), False),
    ("sm100", "tf32", "mma"): BlockFMA(8, 25, 23, -133, _KM.format("B200TC") + " (tf32: fma=8)"
                                       + _MMA_SYNC.format("sm100"), False),
    # sm120 (RTX Blackwell): the toolbox gives the RTX PRO 6000 Blackwell the B200 model (its RTXPRO6000TC.m calls
    # B200TC) without sm120 validation vectors of its own; Triton's tl.dot there is mma.sync for every tile
    ("sm120", "fp16", "mma"): BlockFMA(16, 25, 23, -133, _SM120.format(""), False),
    ("sm120", "bf16", "mma"): BlockFMA(16, 25, 23, -133, _SM120.format(""), False),
    ("sm120", "tf32", "mma"): BlockFMA(8, 25, 23, -133, _SM120.format(" (tf32: fma=8)"), False),
}

#: the operand formats' smallest normal exponent (subnormals keep a denormalised significand)
EMIN: dict[str, int] = {"fp16": -14, "bf16": -126, "tf32": -126, "e4m3": -6, "e5m2": -14}


def model_for(arch: str, kind: str, instr: str = "wgmma") -> BlockFMA:
    """The row of :data:`MODELS`; sm90 FP8 under ``mma.sync`` is the fp16 instruction (Triton upcasts).

    ``instr`` names what Triton emits: ``"wgmma"`` (sm90's warpgroup MMA; on sm100 the same tiles get
    ``tcgen05.mma``, also accepted as ``"tcgen05"``) or ``"mma"`` (mma.sync). Archs without warpgroup MMA (sm80-sm89,
    sm120) run mma.sync whatever ``instr`` says. Raises ``NotImplementedError`` naming what is missing."""
    if arch in ("sm80", "sm86", "sm87", "sm89") and kind != "fp8":
        arch, instr = "sm80", "mma"  # no wgmma before sm90: the A100 model stands in (published)
    if kind in ("e4m3", "e5m2"):
        kind = "fp8"
    if arch == "sm90" and kind == "fp8" and instr == "mma":
        kind = "fp16"
    if arch == "sm100" and instr in ("wgmma", "tcgen05"):
        raise NotImplementedError(f"harness.tensor_cores: no model of {kind} dots under tcgen05.mma (sm100 tiles of a "
                                  "warpgroup or more): no published model of its numerics (Khattak & Mikaitis fitted "
                                  "B200 through wmma/mma.sync, which the sm100 rows cover: instr='mma')")
    if arch in ("sm100", "sm120") and kind == "fp8":
        raise NotImplementedError(
            f"harness.tensor_cores: no model of FP8 dots on {arch}: "
            + ("Triton converts them to fp16 for mma.sync there as on sm90 (16x64 w4, 64x64 w2), not modelled yet"
               if arch == "sm100" else "Triton runs native mma.sync m16n8k32 e4m3/e5m2, whose published models "
               "disagree (the toolbox's B200TC: c aligned with the products; mmaemu 0.1.0: sm_120 not modelled)"))
    try:
        return MODELS[(arch, kind, instr if arch == "sm90" else "mma")]
    except KeyError:
        raise NotImplementedError(f"harness.tensor_cores: no model of {kind} dots on {arch} ({instr}); modelled: "
                                  f"{sorted(set(MODELS))}") from None
