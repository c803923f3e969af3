"""Worst-case error of ``tl.dot`` against exact arithmetic, derived from the rows of :data:`.models.MODELS`, so a
tolerance row for a dot-based op can cite a derivation ("derived: sm90 fp8 accumulator, K=128") instead of a
sweep's worst case times two.

:func:`error_bound` returns an :class:`ErrorBound`: for ``d = dot(a, b, c)`` of one output (length ``K``),

    |d - (c + sum_k a_k b_k)|  <=  alpha * sum_k |a_k|~ |b_k|~  +  beta * |c|  +  atol

where ``|x|~`` is ``|x|`` raised to the operand format's smallest normal (``2^emin``; 0 stays 0): the alignment
magnitude the tensor cores see (they clamp input exponents at emin, so a subnormal operand aligns as a normal
one). For operands without subnormals ``sum |a|~ |b|~ = sum |a_k b_k|``: the bound is the familiar
``alpha * sum|a_k b_k| + beta * |c|``; :meth:`ErrorBound.on` evaluates the general form on tensors. The bound
holds for finite results (no overflow to inf, no inf/NaN operand).

Derivation (block model of :mod:`.chain`; ``n`` products per instruction, ``f`` fraction bits kept below the
block's alignment exponent ``E``, ``fo`` fraction bits of the result, ``E >= min_exp``). A length-K dot is
``J = ceil(K / n)`` steps; step ``j`` takes ``n_j = min(n, K - (j-1) n)`` products and the accumulator
``a_{j-1}`` (``a_0 = c``):

1. Every term (``n_j`` products and ``a_{j-1}``) is truncated toward zero to a multiple of ``2^(E - f)``: an
   error below ``2^(E - f)`` each, ``(n_j + 1) 2^(E - f)`` in all. ``2^E`` is at most the largest alignment
   magnitude in the step (``|a|~ |b|~`` of a product, ``|a_{j-1}|``), or ``2^min_exp`` when clamped.
2. The exact sum ``s_j`` of the truncated terms is truncated to ``fo`` fraction bits of its own exponent (the
   fp32 grid below ``2^-126``): an error below ``2^-fo |s_j| + 2^(-126 - fo)``.
3. Truncation toward zero never grows a magnitude, so ``|s_j|`` and ``|a_j|`` are at most
   ``A_j = |c| + sum of |a|~ |b|~ over the first j steps``, and so is the largest term of step ``j``.

Summing ``e_j <= w_j A_j + t_j`` with ``w_j = (n_j + 1) 2^-f + 2^-fo`` and ``A_j <= |c| + P`` (``P`` the whole
sum of alignment magnitudes): ``alpha = beta = W = sum_j w_j`` (about ``K (n+1)/n 2^-f``), and
``atol = sum_j t_j``, ``t_j = (n_j + 1) 2^(min_exp - f) + 2^(-126 - fo)`` (below ``2^-130``: underflow only).
Inputs the instruction reads rounded add their own error: fp32 operands under ``input_precision="tf32"`` are
read as their top 19 bits (truncated, ``|x' - x| < 2^-10 |x|``, ``|x'| <= |x|``), so ``alpha += 2^-9``.

What Triton wraps around the instruction (:mod:`.chain`'s module docstring):

- FP8 on sm90 with ``max_num_imprecise_acc = m <= K``: ``R = ceil(K / L)`` runs of ``L = 32 ceil(m / 32)``
  products, each from zero (``W_L P_r`` as above), each added to the fp32 accumulator with ``add.f32``
  (round to nearest, ``u = 2^-24`` relative, exact when subnormal). With ``E`` the total error,
  ``E <= W_L P + R u (|c| + P + E) + R t_L``, so ``alpha = (W_L + R u) / (1 - R u)``,
  ``beta = R u / (1 - R u)``, ``atol = R t_L / (1 - R u)``.
- ``input_precision="ieee"`` (fp32): ``K`` ``fma.rn.f32`` in k order, the textbook recursive-sum bound
  ``alpha = beta = gamma_K = K u / (1 - K u)``, plus ``atol = K 2^-149`` for products below the fp32 normal
  range (each rounding then errs by up to half a subnormal step).
- FP8 under ``mma.sync`` on sm90 is the fp16 instruction on exactly converted operands (the fp16 row).

The bound is reached, not vacuous: one large product and every other product just below its block's
truncation step (or an accumulator that large) loses all but the large one; tests/harness/tensor_cores/
test_bounds.py builds such inputs for every row of MODELS and pins how much of the bound they reach.
- ``input_precision="tf32x3"`` (Triton's F32DotTC): ``a = ah + al`` with ``ah = cvt.rna.tf32(a)`` and ``al`` exact in
  fp32; ``|al| <= 2^-11 |a|``, and the instruction reads ``al`` truncated to tf32, ``al'``: ``al`` holds at most 13
  significant bits below ``2^(e_a - 11)``, so ``|al - al'| < 2^-22 |a|`` (this needs ``al`` normal: every nonzero
  operand ``>= 2^-114`` in magnitude; below that the tf32 read of a subnormal ``al`` loses more). Then
  ``d0 = tc(al', bh, 0)``, ``d1 = tc(ah, bl', d0)``, ``d2 = tc(ah, bh, d1)``, ``out = add.f32(d2, c)``. With
  ``h = 1 + 2^-11`` (``|ah| <= h |a|``), the inputs the chains never see err by at most
  ``(2 h 2^-22 + 2^-22) P`` (``al' bh``, ``ah bl'`` and the dropped ``al bl``), each chain by ``W`` times its own
  products plus its incoming accumulator (``P0 = P1 <= 2^-11 h P``, ``P2 <= h^2 P``, accumulators bounded by the
  sums so far plus their errors), and the final ``add.f32`` by ``u (|d2| + |c|)``: ``beta = u`` and ``alpha``,
  ``atol`` the sums of those terms (:func:`_tf32x3_bound`). sm100 lowers it the same way (three kind::tf32 chains
  into TMEM in that order, NaN to 0 before the third, ``add.f32x2`` last: :data:`.tcgen05.LOWERING`), so its bound
  is this one over the tcgen05 chain's terms.

sm100 (``instr="tcgen05"``, or ``"wgmma"``: the tiles that get wgmma on sm90 get ``tcgen05.mma``), from the
published model's structure (:mod:`.tcgen05`). Per instruction ``j`` with ``n_j`` products:

- one-window kinds (``kind::f16``, ``tf32``, ``f8f6f4``; block-scaled ``mxf8f6f4``): every product and ``c`` is
  truncated toward zero to a multiple of ``2^q``, ``q`` = the largest raw exponent among the nonzero products
  (``raw(a) + raw(b)`` plus the scale exponents) and a nonzero ``c``, minus 25. A raw exponent is the encoded one
  (a subnormal's is emin), so ``2^raw(a) <= |a|~`` and ``2^q <= 2^-25`` times the largest alignment magnitude,
  ``|c|~`` included (``max(|c|, 2^-126)``: a subnormal ``c`` has raw exponent -126). Then the exact sum is truncated
  to fp32 (subnormals kept). So ``w_j = (n_j + 1) 2^-25 + 2^-23``, ``t_j = (n_j + 1) 2^(-126 - 25) + 2^-149``:
  the block model above with ``f = 25``, ``fo = 23``, ``min_exp = -126``. No window clamp (Hopper's -133) adds an
  absolute term; tf32 operands are read truncated (``alpha += 2^-9``, as above);
- ``mxf4`` / ``mxf4nvf4`` (e2m1 operands): ``q = max(R - 39, S - 35)`` with ``R`` the largest raw exponent of a
  scaled product or of ``c`` and ``S`` the largest scale-pair exponent of a nonzero product; e2m1's raw exponents
  are at least 0 (0.5 is subnormal), so ``2^S <= |a|~ |b|~ 2^S`` of that product and ``2^q <= 2^-35`` times the
  largest alignment magnitude. Exact sums of product groups (16, or NVFP4's 4) are truncated into the window, one
  truncation per group; a group that ``c`` outranks goes through ``c``'s window ``2^(raw(c) - 35)``, and a ``c``
  that outranks every product sets ``q = raw(c) - 35`` over the K=16 merge groups: each truncation errs below
  ``2^-35`` of the largest alignment magnitude, ``G_j`` groups (4; NVFP4 16) and ``c``. The subnormal group floor
  drops groups below ``2^-174`` each. So ``w_j = (G_j + 1) 2^-35 + 2^-23``, ``t_j = (G_j + 1) 2^(-126 - 35) +
  2^-149 + G_j 2^-174``: the final truncation to fp32 (``2^-23``) is nearly all of the bound;
- block scales: an alignment magnitude is ``|a|~ |b|~ |s_a|~ |s_b|~`` (e8m0 scales are powers of two; a ue4m3
  scale's raw exponent is at least -6, so ``|s|~ = max(|s|, 2^-6)``): :func:`scaled_error_bound`, and
  :meth:`ErrorBound.on` with the scales.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from harness.names import names
from harness.tensor_cores import tcgen05
from harness.tensor_cores.models import EMIN, BlockFMA, _cc, fp8_model, model_for

__all__ = ["ErrorBound", "error_bound", "scaled_error_bound"]

_U = 2.0 ** -24  # fp32 unit roundoff (round to nearest)
_KINDS = ("fp16", "bf16", "fp32", "e4m3", "e5m2")  # the operand kinds the bound covers (the models' names)
_FP8 = ("e4m3", "e5m2")


@dataclass(frozen=True)
class ErrorBound:
    """``|dot(a, b, c) - exact| <= alpha * sum_k |a_k|~ |b_k|~ + beta * |c| + atol`` for one output (see the module
    docstring); ``note`` names what it was derived from, for a tolerance row to cite."""

    alpha: float
    beta: float
    atol: float
    K: int
    note: str
    emin_a: int  #: the operand formats' smallest normal exponents (``|x|~`` = max(|x|, 2^emin) for x != 0)
    emin_b: int
    group: int | None = None       #: block-scaled: k per scale (the bound then needs the scales)
    emin_scale: int | None = None  #: block-scaled: the scales' smallest raw exponent (e8m0 -127, ue4m3 -6)

    def __call__(self, abs_products: float, abs_c: float = 0.0) -> float:
        """The bound for ``sum_k |a_k|~ |b_k|~ = abs_products`` (``sum |a_k b_k|`` for normal operands) and
        ``|c| = abs_c``."""
        return self.alpha * abs_products + self.beta * abs_c + self.atol

    def on(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None = None, *,
           scale_a: torch.Tensor | None = None, scale_b: torch.Tensor | None = None) -> torch.Tensor:
        """The bound of every output of ``dot(a, b, c)``: a [M, K], b [K, N] operand values, c [M, N] or None;
        float64 [M, N]. A block-scaled bound (``group`` set) needs the scale values: ``scale_a`` [M, K/group],
        ``scale_b`` [K/group, N]; an unscaled one refuses them. The sums are float64 (K <= 2^20 terms, each exact),
        so their own rounding, at most ``K 2^-53`` relative, is added."""
        if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0] or a.shape[1] != self.K:
            raise ValueError(f"ErrorBound.on: expected a [M, {self.K}] and b [{self.K}, N], got {tuple(a.shape)} "
                             f"and {tuple(b.shape)}")
        pa, pb = _align_mag(a, self.emin_a), _align_mag(b, self.emin_b)
        if self.group is None:
            if scale_a is not None or scale_b is not None:
                raise ValueError(f"ErrorBound.on: scale_a/scale_b belong to a block-scaled bound; this one is "
                                 f"unscaled ({self.note})")
        else:
            g = self.K // self.group
            for name, s, shape in (("scale_a", scale_a, (a.shape[0], g)), ("scale_b", scale_b, (g, b.shape[1]))):
                if not isinstance(s, torch.Tensor) or tuple(s.shape) != shape:
                    got = tuple(s.shape) if isinstance(s, torch.Tensor) else s
                    raise ValueError(f"ErrorBound.on: {name}: expected the scale values {list(shape)} (a "
                                     f"block-scaled bound, {self.group} k per scale), got {got!r}")
            pa = pa * _align_mag(scale_a, self.emin_scale).repeat_interleave(self.group, 1)
            pb = pb * _align_mag(scale_b, self.emin_scale).repeat_interleave(self.group, 0)
        prods = pa @ pb
        cc = torch.zeros_like(prods) if c is None else c.double().abs()
        return (self.alpha * prods + self.beta * cc) * (1 + self.K * 2.0 ** -52) + self.atol

    def __repr__(self) -> str:
        return f"ErrorBound(alpha={self.alpha:.4g}, beta={self.beta:.4g}, atol={self.atol:.3g}; {self.note})"


def _align_mag(x: torch.Tensor, emin: int) -> torch.Tensor:
    v = x.double().abs()
    return torch.where(v != 0, v.clamp_min(2.0 ** emin), v)


def _kind(dt: object, which: str) -> str:
    try:
        kind = names(dt, which).spec if isinstance(dt, (str, torch.dtype)) else None
    except ValueError:
        kind = None
    if kind in _KINDS:
        return kind
    raise ValueError(f"error_bound: {which} must be one of torch.float16, bfloat16, float32, float8_e4m3fn, "
                     f"float8_e5m2 or one of their names ({', '.join(_KINDS)}; e4nv, float8e4nv ...), got {dt!r}")


def _chain_terms(p: BlockFMA, K: int) -> tuple[float, float]:
    """(W, t): the chain's relative weight ``sum_j w_j`` and absolute term ``sum_j t_j`` over ``ceil(K / n)``
    steps."""
    w = t = 0.0
    for k0 in range(0, K, p.nfma):
        nj = min(p.nfma, K - k0)
        w += (nj + 1) * 2.0 ** -p.frac + 2.0 ** -p.frac_out
        t += (nj + 1) * 2.0 ** (p.min_exp - p.frac) + 2.0 ** (-126 - p.frac_out)
    return w, t


def _describe(p: BlockFMA, arch: str, what: str, instr: str) -> str:
    return (f"{arch} {what} accumulator ({instr} k={p.nfma}, {p.frac} fraction bits aligned, "
            f"{p.frac_out} kept, truncated; {p.provenance} model)")


def error_bound(arch: str, a_dtype: object, b_dtype: object, K: int, *, instr: str = "wgmma",
                input_precision: str | None = None, max_num_imprecise_acc: int | None = None) -> ErrorBound:
    """The worst-case error of ``harness.tensor_cores.dot`` (what ``arch``'s tensor cores compute for ``tl.dot``
    with an fp32 accumulator) against exact arithmetic, for a length-``K`` dot; the derivation is the module
    docstring. ``a_dtype``/``b_dtype``: torch dtypes or names (``"bf16"``, ``"e4m3"``...); ``instr``,
    ``input_precision`` and ``max_num_imprecise_acc`` as :func:`harness.tensor_cores.dot` takes them.

    Raises ValueError for a bad argument, NotImplementedError where :func:`.dot` has no model."""
    if isinstance(K, bool) or not isinstance(K, int) or K < 1:
        raise ValueError(f"error_bound: K must be an int >= 1, got {K!r}")
    if instr not in ("wgmma", "mma", "tcgen05"):
        raise ValueError(f"error_bound: instr must be 'wgmma', 'tcgen05' or 'mma', got {instr!r}")
    if max_num_imprecise_acc is not None and (isinstance(max_num_imprecise_acc, bool)
                                              or not isinstance(max_num_imprecise_acc, int)
                                              or max_num_imprecise_acc < 0):
        raise ValueError(f"error_bound: max_num_imprecise_acc must be an int >= 0 or None, got "
                         f"{max_num_imprecise_acc!r}")
    ka, kb = _kind(a_dtype, "a_dtype"), _kind(b_dtype, "b_dtype")
    if input_precision is not None and (ka, kb) != ("fp32", "fp32"):
        raise ValueError(f"error_bound: input_precision applies to fp32 operands only, got {ka} x {kb}")
    if instr in ("wgmma", "tcgen05") and 100 <= (_cc(arch) or 0) < 120 and input_precision != "ieee":
        return _tcgen05_bound(arch, ka, kb, K, input_precision)
    if instr == "tcgen05":
        raise ValueError(f"error_bound: instr='tcgen05' is sm100's instruction; {arch} has none")
    if ka in _FP8 and kb in _FP8:
        p, upcast = fp8_model(arch, ka, kb, instr)
        if not upcast:
            m = max_num_imprecise_acc or None  # 0: Triton's default, as in harness.interp.dots
            if arch == "sm90" and m is not None and m <= K:
                return _promoted(p, K, m, EMIN[ka], EMIN[kb])
            w, t = _chain_terms(p, K)
            return ErrorBound(w, w, t, K, f"derived: {_describe(p, arch, 'fp8', instr)}, K={K}", EMIN[ka], EMIN[kb])
        w, t = _chain_terms(p, K)  # Triton converts FP8 to fp16 for mma.sync (exact); k order moves no bound
        return ErrorBound(w, w, t, K, f"derived: {_describe(p, arch, 'fp8 (as fp16)', 'mma')}, K={K}",
                          EMIN[ka], EMIN[kb])
    if ka != kb:
        raise NotImplementedError(f"error_bound: mixed operands {ka} x {kb} are not modelled")
    if ka == "fp32":
        ip = input_precision or "tf32"
        if ip == "ieee":
            if K * _U >= 0.5:
                raise NotImplementedError(f"error_bound: K={K} is past the recursive-sum bound's range (K u < 1/2)")
            g = K * _U / (1 - K * _U)
            return ErrorBound(g, g, K * 2.0 ** -149, K, f"derived: fp32 fma.rn chain (ieee), K={K}", -126, -126)
        if ip == "tf32x3":
            p = model_for(arch, "tf32", instr)
            return _tf32x3_bound(_chain_terms(p, K), K, _describe(p, arch, "tf32x3", instr))
        if ip != "tf32":
            raise ValueError(f"error_bound: input_precision must be 'tf32', 'tf32x3', 'ieee' or None, got {ip!r}")
        p = model_for(arch, "tf32", instr)
        w, t = _chain_terms(p, K)
        return ErrorBound(w + 2.0 ** -9, w, t, K, f"derived: {_describe(p, arch, 'tf32', instr)}, K={K}", -126, -126)
    p = model_for(arch, ka, instr)
    w, t = _chain_terms(p, K)
    return ErrorBound(w, w, t, K, f"derived: {_describe(p, arch, ka, instr)}, K={K}", EMIN[ka], EMIN[kb])


def _promoted(p: BlockFMA, K: int, m: int, emin_a: int, emin_b: int) -> ErrorBound:
    L = 32 * max(1, math.ceil(m / 32))
    R = math.ceil(K / L)
    w, t = _chain_terms(p, min(L, K))
    d = 1 - R * _U
    return ErrorBound((w + R * _U) / d, R * _U / d, R * t / d, K,
                      f"derived: {_describe(p, 'sm90', 'fp8', 'wgmma')}, runs of {L} added with add.f32, K={K}",
                      emin_a, emin_b)


def _tf32x3_bound(wt: tuple[float, float], K: int, what: str) -> ErrorBound:
    """tf32x3's bound (the module docstring) over one chain's terms ``wt = (W, t)``: each quantity as (coefficient
    of ``P``, absolute term)."""
    w, t = wt
    h, s = 1 + 2.0 ** -11, 2.0 ** -11
    p0 = p1 = s * h
    p2 = h * h
    e0 = (w * p0, t)                                     # d0 = tc(al', bh, 0)
    d0 = (p0 + e0[0], e0[1])
    e1 = (w * (p1 + d0[0]), w * d0[1] + t)               # d1 = tc(ah, bl', d0)
    d1 = (p0 + p1 + e0[0] + e1[0], e0[1] + e1[1])
    e2 = (w * (p2 + d1[0]), w * d1[1] + t)               # d2 = tc(ah, bh, d1)
    d2 = (p2 + d1[0] + e2[0], d1[1] + e2[1])
    split = (2 * h + 1) * 2.0 ** -22                     # al' bh, ah bl' and the dropped al bl
    alpha = split + e0[0] + e1[0] + e2[0] + _U * d2[0]
    atol = e0[1] + e1[1] + e2[1] + _U * d2[1]
    return ErrorBound(alpha, _U, atol, K, f"derived: {what}, three chains and add.f32, operands >= 2^-114, K={K}",
                      -126, -126)


def _tcgen05_terms(row: tcgen05.Tcgen05Kind, K: int) -> tuple[float, float]:
    """(W, t) of a chain of ``row``'s instructions over ``K`` (the module docstring): per instruction, the
    truncations into the window (products or product groups, and ``c``), each below ``2^-bits`` of the largest
    alignment magnitude, and the truncation of the sum to fp32."""
    bits = row.window if row.scale_floor is None else min(row.window, row.scale_floor)
    w = t = 0.0
    for k0 in range(0, K, row.k):
        n = min(row.k, K - k0)
        groups = n if row.product_group is None else -(-n // row.product_group)
        w += (groups + 1) * 2.0 ** -bits + 2.0 ** -23
        t += (groups + 1) * 2.0 ** (-126 - bits) + 2.0 ** -149
        if row.subnormal_floor is not None:
            t += groups * 2.0 ** row.subnormal_floor
    return w, t


def _tcgen05_note(row: tcgen05.Tcgen05Kind, arch: str, what: str) -> str:
    trunc = (f"products truncated into a {row.window}-bit window" if row.product_group is None else
             f"groups of {row.product_group} truncated into a window of max(R-{row.window}, S-{row.scale_floor})")
    return f"{arch} {what} accumulator (tcgen05.mma {row.kind} k={row.k}, {trunc}, fp32 truncated; published model)"


def _tcgen05_bound(arch: str, ka: str, kb: str, K: int, input_precision: str | None) -> ErrorBound:
    tcgen05.check_arch(arch)
    if ka in _FP8 and kb in _FP8:
        row, what = tcgen05.KINDS["f8f6f4"], "fp8"
    elif ka != kb:
        raise NotImplementedError(f"error_bound: mixed operands {ka} x {kb} are not modelled")
    elif ka == "fp32":
        row, what = tcgen05.KINDS["tf32"], "tf32"
    else:
        row, what = tcgen05.KINDS["f16"], ka
    w, t = _tcgen05_terms(row, K)
    note = f"derived: {_tcgen05_note(row, arch, what)}, K={K}"
    if ka != "fp32":
        return ErrorBound(w, w, t, K, note, EMIN[ka], EMIN[kb])
    ip = input_precision or "tf32"
    if ip == "tf32":
        return ErrorBound(w + 2.0 ** -9, w, t, K, note, -126, -126)
    if ip == "tf32x3":
        return _tf32x3_bound((w, t), K, _tcgen05_note(row, arch, "tf32x3"))
    raise ValueError(f"error_bound: input_precision must be 'tf32', 'tf32x3', 'ieee' or None, got {ip!r}")


#: block scale dtypes by name -> (torch dtype, smallest raw exponent)
_SCALES = {"e8m0": (torch.uint8, -127), "ue4m3": (torch.float8_e4m3fn, -6)}
_SCALED_FORMATS = {"e2m1": 0, "e4m3": -6, "e5m2": -14}


def scaled_error_bound(arch: str, a_format: str, b_format: str, K: int, *, scale: str = "e8m0",
                       group: int = 32) -> ErrorBound:
    """The worst-case error of a native block-scaled ``tl.dot_scaled`` tile on ``arch`` (sm100's ``tcgen05.mma
    ... block_scale``, :func:`harness.tensor_cores.dot_scaled` with ``instr="tcgen05"`` on a tile
    :func:`.tcgen05.native_tile` accepts) against exact arithmetic, for a length-``K`` dot: ``|d - (c + sum_k a_k
    s_a b_k s_b)| <= alpha sum_k |a_k|~ |s_a|~ |b_k|~ |s_b|~ + beta |c| + atol`` (module docstring;
    :meth:`ErrorBound.on` takes the scale values). ``a_format``/``b_format``: "e2m1", "e4m3", "e5m2"; ``scale``:
    "e8m0" (uint8 codes) or "ue4m3" (NVFP4's float8_e4m3fn scales, groups of 16); ``group``: k per scale, 32 or 16.

    Raises ValueError for a bad argument, NotImplementedError where no published model covers it (an arch other
    than sm100)."""
    if isinstance(K, bool) or not isinstance(K, int) or K < 1:
        raise ValueError(f"scaled_error_bound: K must be an int >= 1, got {K!r}")
    for arg, fmt in (("a_format", a_format), ("b_format", b_format)):
        if fmt not in _SCALED_FORMATS:
            raise ValueError(f"scaled_error_bound: {arg} must be one of {', '.join(_SCALED_FORMATS)}, got {fmt!r}")
    if scale not in _SCALES:
        raise ValueError(f"scaled_error_bound: scale must be 'e8m0' or 'ue4m3', got {scale!r}")
    if group not in (16, 32) or (scale == "ue4m3" and group != 16):
        raise ValueError(f"scaled_error_bound: group must be 32 or 16 (ue4m3 scales: 16), got {group!r} with {scale}")
    if K % group:
        raise ValueError(f"scaled_error_bound: K={K} is not a whole number of scale groups of {group}")
    if not 100 <= (_cc(arch) or 0) < 120:
        raise NotImplementedError(f"scaled_error_bound: {arch} has no native block-scaled MMA modelled here (sm90 "
                                  "and sm80-sm89 emulate dot_scaled: error_bound of the bf16 dot after the upcast)")
    tcgen05.check_arch(arch)
    dtype, emin_s = _SCALES[scale]
    row = tcgen05.scaled_row(a_format, b_format, dtype, group)
    if K % row.k:
        raise ValueError(f"scaled_error_bound: K={K} is not a multiple of {row.kind}'s k={row.k} (the compiler "
                         "refuses such a native tile)")
    w, t = _tcgen05_terms(row, K)
    note = f"derived: {_tcgen05_note(row, arch, f'{a_format} x {b_format}, {scale} scales')}, K={K}"
    return ErrorBound(w, w, t, K, note, _SCALED_FORMATS[a_format], _SCALED_FORMATS[b_format], group, emin_s)
