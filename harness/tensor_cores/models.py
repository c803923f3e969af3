"""The tensor-core numerics as data: one :class:`BlockFMA` row per (arch, operand kind, instruction), each with
its source (measured on the H200 here, or published and not measured here). :mod:`.chain` evaluates them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BlockFMA", "DotRefused", "MODELS", "EMIN", "fp8_model", "model_for"]


class DotRefused(NotImplementedError):
    """The target's compiler refuses this ``tl.dot`` (a kernel holding it does not compile there)."""


@dataclass(frozen=True)
class BlockFMA:
    """One tensor-core instruction's numerics (see the module docstring)."""

    nfma: int         #: products per block: the instruction's k
    frac: int         #: fraction bits kept below the block's alignment exponent
    frac_out: int     #: fraction bits of the block result (truncated)
    min_exp: int      #: lower clamp of the alignment exponent
    source: str       #: where the numbers come from
    measured: bool    #: True: checked bit for bit on an H200 here; False: published, not measured here

    @property
    def provenance(self) -> str:
        """"measured" (checked bit for bit on an H200 here) or "published" (not measured here): the word docs and
        test ids carry, so a published row is never read as a measured one."""
        return "measured" if self.measured else "published"

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
    # gives tl.dot on sm100 below a warpgroup tile (16x64 w4, 64x64 w2), not tcgen05.mma (harness.tensor_cores.tcgen05)
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


def _cc(arch: str) -> int | None:
    """``arch``'s capability as one number (86 for "sm86"); None for a name that is no CUDA arch."""
    from harness.arch import parse_arch

    try:
        return parse_arch(arch).cc
    except (TypeError, ValueError):
        return None


def model_for(arch: str, kind: str, instr: str = "wgmma") -> BlockFMA:
    """The row of :data:`MODELS`; FP8 that Triton converts to fp16 gets the fp16 ``mma`` row (:func:`fp8_model`).

    ``instr`` names what Triton emits: ``"wgmma"`` (sm90's warpgroup MMA; on sm100 the same tiles get
    ``tcgen05.mma``, also accepted as ``"tcgen05"``) or ``"mma"`` (mma.sync). Archs without warpgroup MMA (sm80-sm89,
    sm120) run mma.sync whatever ``instr`` says. ``kind``: fp16, bf16, tf32, or e4m3 / e5m2 / fp8 (any FP8 pair; on
    sm80-sm87, where only e5m2 compiles, the e5m2 pair). Raises :class:`DotRefused` where the target's compiler
    refuses the operands, ``NotImplementedError`` naming what is missing otherwise."""
    if kind in ("e4m3", "e5m2", "fp8"):
        return fp8_model(arch, "e5m2" if kind == "fp8" else kind, "e5m2" if kind == "fp8" else kind, instr)[0]
    if arch in ("sm80", "sm86", "sm87", "sm89"):
        arch, instr = "sm80", "mma"  # no wgmma before sm90: the A100 model stands in (published)
    if arch == "sm100" and instr in ("wgmma", "tcgen05"):
        raise NotImplementedError(f"harness.tensor_cores: {kind} dots under tcgen05.mma (sm100 tiles of a warpgroup "
                                  "or more) are no BlockFMA row: their published model is harness.tensor_cores."
                                  "tcgen05 (KINDS), which harness.tensor_cores.dot runs for instr='tcgen05'")
    try:
        return MODELS[(arch, kind, instr if arch == "sm90" else "mma")]
    except KeyError:
        raise NotImplementedError(f"harness.tensor_cores: no model of {kind} dots on {arch} ({instr}); modelled: "
                                  f"{sorted(set(MODELS))}") from None


def fp8_model(arch: str, a_fmt: str, b_fmt: str, instr: str = "wgmma") -> tuple[BlockFMA, bool]:
    """The row an FP8 ``tl.dot`` (``a_fmt`` x ``b_fmt``, each e4m3 or e5m2) runs on for ``arch`` and ``instr``, and
    whether Triton first converts the operands to fp16 (``True``: the row is the fp16 ``mma`` one, the operands in
    the k order of a kWidth=4 dot operand layout, :func:`harness.tensor_cores.chain.mma_k_order`).

    Why per arch (read from the TTGIR/PTX of plain ``tl.dot`` tiles, every FP8 pair, Triton 3.6.0 and 3.9.0, the same
    in both; ``scripts/compile_dot_scaled_lowering.py --plain``, 2026-12-04):

    - below sm89 the front end refuses e4m3 (``type fp8e4nv not supported in this architecture``; the CUDA backend
      adds fp8e4nv to the supported FP8 types from capability 89 on), mixed pairs included: :class:`DotRefused`;
      e5m2 x e5m2 on sm80/sm86 is ``tt.fp_to_fp`` to f16 in a kWidth=4 layout, then mma.sync m16n8k16 f16 for
      every tile (the A100 fp16 row, published);
    - sm89 and sm120: native mma.sync m16n8k32 on e4m3/e5m2 for every tile. sm89: mmaemu's "ada" preset
      (published). sm120: no model, because the published sources disagree (the toolbox gives sm_120 its B200 model,
      c aligned with the products; mmaemu 0.1.0 refuses sm_120 and says its B200 mma.sync preset, c added late, is
      no model of sm_120's native FP8 mma);
    - sm90 and sm100 below a warpgroup (``instr="mma"``: M not a multiple of 64 or ``num_warps`` not a multiple of
      4, e.g. 16x64 w4, 64x64 w2): f16 in a kWidth=4 layout, mma.sync m16n8k16 (sm90: measured on the H200; sm100:
      the B200 fp16 row, published); warpgroup tiles: sm90 ``wgmma`` on FP8 (mmaemu's "hopper", measured), sm100
      ``tcgen05.mma kind::f8f6f4`` (the published model of :mod:`.tcgen05`, no BlockFMA row: ``NotImplementedError``
      here; :func:`harness.tensor_cores.dot` runs it)."""
    for arg, fmt in (("a_fmt", a_fmt), ("b_fmt", b_fmt)):
        if fmt not in ("e4m3", "e5m2"):
            raise ValueError(f"{arg}: expected 'e4m3' or 'e5m2'; got {fmt!r}")
    cc = _cc(arch)
    if cc is not None and cc < 89 and "e4m3" in (a_fmt, b_fmt):
        raise DotRefused(f"an {a_fmt} x {b_fmt} tl.dot does not compile for {arch}: Triton's front end says 'type "
                         "fp8e4nv not supported in this architecture' below sm89 (Triton 3.6 and 3.9: the CUDA backend "
                         "lists fp8e4nv from capability 89 on; compiled for sm80 and sm86, 2026-12-04, where e5m2 x "
                         "e5m2 compiles)")
    if cc is not None and 80 <= cc < 89:
        return MODELS[("sm80", "fp16", "mma")], True
    if arch in ("sm90", "sm100") and instr == "mma":
        return MODELS[(arch, "fp16", "mma")], True
    if arch == "sm100":
        raise NotImplementedError("harness.tensor_cores: FP8 dots under tcgen05.mma kind::f8f6f4 (sm100 tiles of a "
                                  "warpgroup or more) are no BlockFMA row: their published model is "
                                  "harness.tensor_cores.tcgen05 (KINDS), which harness.tensor_cores.dot runs")
    if arch == "sm120":
        raise NotImplementedError(
            "harness.tensor_cores: no model of FP8 dots on sm120 (native mma.sync m16n8k32 e4m3/e5m2 for every tile, "
            "Triton 3.6/3.9): the published models disagree: the toolbox (Khattak & Mikaitis, RTXPRO6000TC.m) gives "
            "sm_120 its B200 model, c aligned with the products, while mmaemu 0.1.0 refuses sm_120 and states that its "
            "B200 mma.sync preset (c added late) is no model of sm_120's native FP8 mma; neither has sm_120 vectors")
    key = (arch, "fp8", instr if arch == "sm90" else "mma")
    if key not in MODELS:
        raise NotImplementedError(f"harness.tensor_cores: no model of FP8 dots on {arch} ({instr}); modelled: "
                                  f"{sorted(k for k in MODELS if k[1] == 'fp8')} and FP8 converted to fp16 on "
                                  "sm80-sm87, and under mma.sync on sm90/sm100")
    return MODELS[key], False
