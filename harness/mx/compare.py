"""``assert_mx_close``: block-scaled tensors (codes + scales [+ NVFP4's global scale]) against a reference.

Three rules side by side, because each misses what another sees:

* **block scales**: equal, or within ``scale_ulp`` codes (e8m0 / ue4m3 steps). A wrong scale rule or layout moves
  scales; element codes alone would not show it (a block at twice the scale has half the codes).
* **element codes**: within ``max_ulp`` steps of the element format, in the blocks whose scales are equal (codes of
  blocks at different scales are not comparable; those blocks are judged by the global rule only); up to
  ``floor(max_mismatch * n)`` may break it.
* **NaN**: a NaN block scale, a NaN or inf element code, a NaN or inf NVFP4 global scale, and so a NaN value after
  dequantization, fails on either side unless ``nan_equal=True``; then NaN passes only facing NaN at the same place
  (any NaN code of the format, as ``torch.testing``'s ``equal_nan`` treats every NaN as one). Inf element codes and
  an inf global scale never pass (MX casts saturate, so an inf code is a bug, as in :mod:`harness.compare`), nor
  does a global scale <= 0 (no NVFP4 tensor has one); ``max_mismatch`` and ``scale_ulp`` never cover any of them.
* **global error**: rel-L2 of the dequantized tensors (``max_rel_l2``) and, given the ``source`` the codes were
  quantized from, an SQNR floor (``min_sqnr_db``, which needs ``source``): the check that still bites when every
  element is "one code off". A finite value where the source holds NaN or inf scores -inf dB: the quantization
  hid it.

The check returns an :class:`~harness.mx.message.MxMismatch` record (or None) and reports to the session summary;
only :func:`assert_mx_close` raises, once, with ``__tracebackhide__``. With ``source=`` a failure also says which
known convention (scale rule, rounding, saturation) produced the actual and the expected codes
(:mod:`harness.mx.diagnose`). Blocks run along the last axis; FP4 codes are packed two per byte along it.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from harness import summary, vacuity
from harness.mx import diagnose
from harness.mx.formats import ULP_FAR, decode, ulp_distance
from harness.mx.layouts import swizzled_shape, unswizzle_scales
from harness.mx.message import MAX_ROWS, BlockRow, ElemRow, MxMismatch, format_mx_mismatch
from harness.mx.schemes import Scheme, get_scheme
from harness.session import current_arch
from harness.text import Msg, check_msg
from harness.tolerances import Tolerance

__all__ = ["assert_mx_close", "check_mx"]

LAYOUTS = ("linear", "swizzled")
_HIST = (("0", 0, 0), ("1", 1, 1), ("2", 2, 2), ("3+", 3, (1 << 16) - 1), ("far/NaN", 1 << 16, 1 << 62))


def _parts(q: Any, scheme: Scheme, name: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    want = 3 if scheme.name == "nvfp4" else 2
    what = "(codes, scales, global_scale)" if want == 3 else "(codes, scales)"
    if not isinstance(q, (tuple, list)) or len(q) != want:
        got = f"a {type(q).__name__} of {len(q)}" if isinstance(q, (tuple, list)) else type(q).__name__
        raise TypeError(f"{name}: {scheme.name} is compared as a tuple {what}, as quantize returns it; got {got}")
    for part, t in zip(("codes", "scales"), q[:2], strict=False):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.uint8:
            got = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
            raise TypeError(f"{name}: its {part} must be a torch.uint8 tensor of codes; got {got}")
        _readable(t, f"{name}: its {part}")
        if t.dim() == 0:
            raise ValueError(f"{name}: its {part} must have at least one dimension (blocks run along the last "
                             f"axis); got a 0-d tensor")
    g = None
    if want == 3:
        if not isinstance(q[2], (torch.Tensor, int, float)) or isinstance(q[2], bool) or (
                isinstance(q[2], torch.Tensor) and not q[2].is_floating_point()):
            got = q[2].dtype if isinstance(q[2], torch.Tensor) else type(q[2]).__name__
            raise TypeError(f"{name}: its global_scale must be a float tensor or a number; got {got}")
        if isinstance(q[2], torch.Tensor):
            _readable(q[2], f"{name}: its global_scale")
        g = torch.as_tensor(q[2], dtype=torch.float32).detach().cpu()
        if g.numel() != 1:
            raise ValueError(f"{name}: its global_scale must be one value; got shape {tuple(g.shape)}")
    return q[0].detach().cpu(), q[1].detach().cpu(), g


def _readable(t: torch.Tensor, what: str) -> None:
    """A tensor whose values can be read here: not on the meta device (a shape without values), not sparse."""
    if t.device.type == "meta":
        raise ValueError(f"{what} is on the meta device: it has a shape and a dtype but no values to compare")
    if t.layout != torch.strided:
        raise ValueError(f"{what} has layout {t.layout}; pass a dense tensor (.to_dense())")


def _in_range(codes: torch.Tensor, fmt: str, what: str) -> None:
    """Codes of a sub-byte format (FP4/FP6 elements, ue4m3 scales) with no bit set above the format's width: such a
    byte is no code of it, and naming the side here says which tensor holds it."""
    from harness.mx.formats import FORMATS

    f = FORMATS.get(fmt)
    if f is not None and f.bits < 8 and codes.numel() and int(codes.max()) >= 1 << f.bits:
        raise ValueError(f"{what}: {fmt} codes are {f.bits}-bit (< {1 << f.bits:#x}); got {int(codes.max()):#x}")


def _scales(s: torch.Tensor, layout: str, elems: torch.Tensor, block: int, name: str, side: str) -> torch.Tensor:
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise ValueError(f"{name}: expected one of {', '.join(LAYOUTS)}; got {layout!r}")
    if layout == "linear":
        return s
    if elems.dim() != 2:
        raise ValueError(f"{name}='swizzled' needs 2-D codes (rows, K); got shape {tuple(elems.shape)}")
    rows, cols = elems.shape[0], elems.shape[1] // block
    R, C = swizzled_shape(rows, cols)
    if s.numel() != R * C:
        raise ValueError(f"{side}: its scales have shape {tuple(s.shape)}, not the {R * C} bytes of a swizzled "
                         f"buffer ({R}x{C}, padded from {rows}x{cols}) for codes of shape {tuple(elems.shape)} "
                         f"({name}='swizzled')")
    return unswizzle_scales(s, rows, cols)


def _index(flat: int, shape: torch.Size) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        out.append(flat % size)
        flat //= size
    return tuple(reversed(out))


def _elem_ulp(a: torch.Tensor, e: torch.Tensor, scheme: Scheme) -> torch.Tensor:
    """Element code distances as int64 for every scheme: harness.fp8's are int32, against which the histogram's
    top bin edge (2^62) wraps to 0, and its NaN elements fell in no bin."""
    if scheme.elem_name in ("e4m3", "e5m2"):
        from harness import fp8

        return fp8.ulp_distance(a, e, "e4nv" if scheme.elem_name == "e4m3" else "e5m2").to(torch.int64)
    return ulp_distance(a, e, scheme.elem_name)


def _elem_values(codes: torch.Tensor, scheme: Scheme) -> torch.Tensor:
    if scheme.elem_name in ("e4m3", "e5m2"):
        return codes.view(scheme.elem).float()
    return decode(codes, scheme.elem_name)


def _tol(tol: Tolerance | None, max_ulp: int | None, max_mismatch: float | None) -> Tolerance:
    from harness.compare.checks import EXPLICIT, check_tol

    if tol is not None:
        if max_ulp is not None or max_mismatch is not None:
            raise ValueError("assert_mx_close: pass either tol= or max_ulp=/max_mismatch=, not both")
        return check_tol(tol, "codes")
    return Tolerance(max_ulp=0 if max_ulp is None else max_ulp, max_mismatch=max_mismatch or 0.0, key=EXPLICIT)


def _check_limit(v: Any, name: str, *, integer: bool = False) -> None:
    ok = isinstance(v, int) if integer else isinstance(v, (int, float))
    if v is not None and (not ok or isinstance(v, bool) or not math.isfinite(v) or v < 0):
        raise ValueError(f"{name}: expected {'an int' if integer else 'a finite number'} >= 0; got {v!r}")


def _global(a: torch.Tensor, e: torch.Tensor, src: torch.Tensor | None) -> tuple[float, float | None, float | None]:
    fin = torch.isfinite(a) & torch.isfinite(e)
    a64, e64 = a.double()[fin], e.double()[fin]
    num, den = float((a64 - e64).square().sum()), float(e64.square().sum())
    rel = math.sqrt(num / den) if den > 0 else (0.0 if num == 0 else math.inf)
    if src is None:
        return rel, None, None

    def sqnr(q: torch.Tensor) -> float:
        # a finite value where the source held NaN or inf hid it (MX casts make such a block's scale NaN): that
        # noise has no finite measure; NaN values themselves are judged by the NaN rule, not here
        if bool((torch.isfinite(q) & ~torch.isfinite(src)).any()):
            return -math.inf
        ok = torch.isfinite(q) & torch.isfinite(src)
        s64 = src.double()[ok]
        noise = float((q.double()[ok] - s64).square().sum())
        signal = float(s64.square().sum())
        return math.inf if noise == 0 else (-math.inf if signal == 0 else 10 * math.log10(signal / noise))

    return rel, sqnr(a), sqnr(e)


def _nan_rule(nan_a: torch.Tensor, nan_e: torch.Tensor, special: torch.Tensor, nan_equal: bool
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """(accepted, refused) masks of the special values: NaN facing NaN is accepted only with ``nan_equal``;
    every other NaN or inf (``special``: either side) is refused."""
    accepted = nan_a & nan_e if nan_equal else torch.zeros_like(special)
    return accepted, special & ~accepted


def check_mx(actual: Any, expected: Any, scheme: Any, *, tol: Tolerance, scale_ulp: int = 0,
             max_rel_l2: float | None = None, min_sqnr_db: float | None = None, source: torch.Tensor | None = None,
             layout: str = "linear", expected_layout: str = "linear", op: str = "", dtype: str = "",
             nan_equal: bool = False) -> MxMismatch | None:
    """The comparison behind :func:`assert_mx_close`; None when every rule holds."""
    from harness.compare.checks import check_flag, row_identity

    sch = get_scheme(scheme)
    check_flag(nan_equal, "nan_equal")
    _check_limit(scale_ulp, "scale_ulp", integer=True)
    _check_limit(max_rel_l2, "max_rel_l2")
    if min_sqnr_db is not None and (not isinstance(min_sqnr_db, (int, float)) or isinstance(min_sqnr_db, bool)
                                    or not math.isfinite(min_sqnr_db)):
        raise ValueError(f"min_sqnr_db: expected a finite number; got {min_sqnr_db!r}")
    if min_sqnr_db is not None and source is None:
        raise ValueError("min_sqnr_db: the SQNR is measured against source=, the tensor both sides were quantized "
                         "from; pass it, or drop min_sqnr_db")
    ac, as_, ag = _parts(actual, sch, "actual")
    ec, es, eg = _parts(expected, sch, "expected")
    ae, ee = sch.element_codes(ac), sch.element_codes(ec)
    for side, codes, scales in (("actual", ae, as_), ("expected", ee, es)):
        _in_range(codes, sch.elem_name, f"{side}: its codes")
        _in_range(scales, sch.scale, f"{side}: its scales")
    op, dtype = row_identity(tol, op, dtype, "")
    arch = current_arch().name
    m = MxMismatch(scheme=sch.name, op=op, dtype=dtype, arch=arch, tol=tol, scale_ulp=scale_ulp,
                   max_ulp=tol.max_ulp or 0, max_rel_l2=max_rel_l2, min_sqnr_db=min_sqnr_db)
    if ae.shape != ee.shape:
        m.shapes["element codes"] = (tuple(ae.shape), tuple(ee.shape))
    else:
        as_ = _scales(as_, layout, ae, sch.block, "layout", "actual")
        es = _scales(es, expected_layout, ee, sch.block, "expected_layout", "expected")
        want = (*ae.shape[:-1], ae.shape[-1] // sch.block) if ae.dim() else ()
        for what, s in (("actual scales", as_), ("expected scales", es)):
            if tuple(s.shape) != tuple(want) or ae.shape[-1] % sch.block:
                m.shapes[what] = (tuple(s.shape), tuple(want))
    if source is not None and not m.shapes:
        if not isinstance(source, torch.Tensor) or not source.is_floating_point():
            raise TypeError(f"source: expected the floating-point tensor that was quantized; got "
                            f"{getattr(source, 'dtype', type(source).__name__)}")
        _readable(source, "source")
        if tuple(source.shape) != tuple(ae.shape):
            raise ValueError(f"source: shape {tuple(source.shape)} is not the element shape {tuple(ae.shape)}")
    if m.shapes:
        summary.record(op=op, dtype=dtype, arch=arch, n=ee.numel(), tol=tol, passed=False)
        return m

    # block scales
    sa_nan, se_nan = torch.isnan(decode(as_, sch.scale)), torch.isnan(decode(es, sch.scale))
    s_ok, s_bad = _nan_rule(sa_nan, se_nan, sa_nan | se_nan, nan_equal)
    sd = torch.where(as_ == es, 0, ulp_distance(as_, es, sch.scale))
    sd = torch.where(s_bad, ULP_FAR, torch.where(s_ok, 0, sd))
    m.n_blocks = sd.numel()
    m.k_blocks = int(((sd > scale_ulp) | s_bad).sum())
    m.nan_blocks = int(s_bad.sum())
    m.n_diff_blocks = int((sd > 0).sum())
    if m.n_blocks:
        i = int(sd.reshape(-1).argmax())
        m.worst_scale_ulp, m.worst_scale_index = int(sd.reshape(-1)[i]), _index(i, sd.shape)
    if ag is not None:
        fa, fe = float(ag), float(eg)
        both_nan = math.isnan(fa) and math.isnan(fe) and nan_equal
        # an fp32 global scale is positive (quantize refuses any other): 0 or a negative one equal on both sides
        # is no NVFP4 tensor, and would pass as one
        if not ((fa == fe and math.isfinite(fa) and fa > 0) or both_nan):
            m.global_scales = (fa, fe)
    # elements, in blocks whose scales are equal; a NaN or inf code is judged everywhere
    same = (as_ == es).repeat_interleave(sch.block, -1)
    va_el, ve_el = _elem_values(ae, sch), _elem_values(ee, sch)
    e_ok, e_bad = _nan_rule(torch.isnan(va_el), torch.isnan(ve_el), ~torch.isfinite(va_el) | ~torch.isfinite(ve_el),
                            nan_equal)
    ud = _elem_ulp(ae, ee, sch)
    ud = torch.where(ae == ee, 0, ud)
    ud = torch.where(e_bad, ULP_FAR, torch.where(e_ok, 0, ud))
    bad = ((ud > m.max_ulp) & same) | e_bad
    m.nan_elems = int(e_bad.sum())
    m.n_elems, m.n_compared, m.k_elems = ee.numel(), int(same.sum()), int(bad.sum())
    m.allowed_k = math.floor(tol.max_mismatch * m.n_compared + 1e-9)
    cmp = torch.where(same, ud, -1)
    if m.n_compared:
        j = int(cmp.reshape(-1).argmax())
        m.worst_ulp, m.worst_ulp_index = int(cmp.reshape(-1)[j]), _index(j, ud.shape)
    # global error over the dequantized values
    def deq(c: torch.Tensor, s: torch.Tensor, g: torch.Tensor | None) -> torch.Tensor:
        v = _elem_values(c, sch) * decode(s, sch.scale).repeat_interleave(sch.block, -1)
        return v * g if g is not None else v

    av, ev = deq(ae, as_, ag), deq(ee, es, eg)
    # a probe of --harness-vacuity needs the SQNR only where it judges
    src = None if source is None or (vacuity.probing() and min_sqnr_db is None) else source.detach().cpu()
    m.rel_l2, m.sqnr_db, m.sqnr_expected_db = _global(av, ev, src)
    nan_a, nan_e = torch.isnan(av), torch.isnan(ev)
    nan_ok = bool(torch.equal(nan_a, nan_e)) and (nan_equal or not bool(nan_a.any()))
    if not nan_ok:
        m.nan_counts = (int(nan_a.sum()), int(nan_e.sum()))
    passed = (m.k_blocks == 0 and m.global_scales is None and m.k_elems <= m.allowed_k and m.nan_elems == 0
              and nan_ok
              and (max_rel_l2 is None or m.rel_l2 <= max_rel_l2)
              and (min_sqnr_db is None or (m.sqnr_db is not None and m.sqnr_db >= min_sqnr_db)))
    if summary.active() is not None:
        summary.record(op=op, dtype=dtype, arch=arch, n=m.n_elems, worst_ulp=m.worst_ulp, tol=tol, passed=passed,
                       worst_abs=float((av - ev).abs()[torch.isfinite(av - ev)].max()) if m.n_elems and
                       bool(torch.isfinite(av - ev).any()) else None)
    if passed:
        vacuity.probe(
            "assert_mx_close",
            lambda c: check_mx(c, expected, sch, tol=tol, scale_ulp=scale_ulp, max_rel_l2=max_rel_l2,
                               min_sqnr_db=min_sqnr_db, source=source, layout="linear",
                               expected_layout=expected_layout, op=op, dtype=dtype, nan_equal=nan_equal) is None,
            lambda: vacuity.mx_corruptions(expected, sch, expected_layout=expected_layout, max_ulp=m.max_ulp,
                                           max_mismatch=tol.max_mismatch),
            op=op, dtype=dtype, tol=tol,
            row={"max_ulp": m.max_ulp, "max_mismatch": tol.max_mismatch, "scale_ulp": scale_ulp,
                 "max_rel_l2": max_rel_l2, "min_sqnr_db": min_sqnr_db})
        return None
    m.hist = {label: int(((ud >= lo) & (ud <= hi) & same).sum()) for label, lo, hi in _HIST}
    bad_blocks = ((sd > scale_ulp) | s_bad).reshape(-1).nonzero().reshape(-1)
    order = torch.sort(sd.reshape(-1)[bad_blocks], descending=True, stable=True).indices[:MAX_ROWS]
    sa_v, se_v = decode(as_, sch.scale).reshape(-1), decode(es, sch.scale).reshape(-1)
    for i in bad_blocks[order].tolist():
        m.block_rows.append(BlockRow(_index(i, sd.shape), int(as_.reshape(-1)[i]), int(es.reshape(-1)[i]),
                                     float(sa_v[i]), float(se_v[i]), int(sd.reshape(-1)[i])))
    bad_el = bad.reshape(-1).nonzero().reshape(-1)
    order = torch.sort(ud.reshape(-1)[bad_el], descending=True, stable=True).indices[:MAX_ROWS]
    for i in bad_el[order].tolist():
        m.elem_rows.append(ElemRow(_index(i, ud.shape), int(ae.reshape(-1)[i]), int(ee.reshape(-1)[i]),
                                   float(av.reshape(-1)[i]), float(ev.reshape(-1)[i]), int(ud.reshape(-1)[i])))
    if src is not None and not vacuity.probing():  # a probe needs the verdict, not the diagnosis
        m.diagnosis = _diagnose(sch, src, ae, ee, as_, es, ag, eg)
    return m


def _diagnose(sch: Scheme, src: torch.Tensor, ae: torch.Tensor, ee: torch.Tensor, as_: torch.Tensor,
              es: torch.Tensor, ag: torch.Tensor | None, eg: torch.Tensor | None) -> list[str]:
    """Which convention the scales and the elements of each side are (elements judged with the scales as given)."""
    blocks = src.float().reshape(*src.shape[:-1], -1, sch.block)
    amax = blocks.abs().amax(-1)
    lines = []
    if not torch.equal(as_, es):
        lines.append(diagnose.describe(as_, es, diagnose.scale_conventions(amax, sch, ag), "block scales"))
    same = as_ == es
    if not bool(same.any()):
        return lines
    s = decode(as_, sch.scale).double() * (float(ag) if ag is not None else 1.0)
    scaled = torch.where(s.unsqueeze(-1) > 0, blocks.double() / s.unsqueeze(-1), 0.0)
    keep = same.unsqueeze(-1).expand_as(scaled)
    x, a_codes, e_codes = scaled[keep], ae.reshape(scaled.shape)[keep], ee.reshape(scaled.shape)[keep]
    if torch.equal(a_codes, e_codes):
        return lines
    if sch.elem_name in ("e4m3", "e5m2"):
        conv = diagnose.fp8_conventions(x.float(), "e4nv" if sch.elem_name == "e4m3" else "e5m2")
    else:
        recip = None
        if sch.name == "nvfp4":
            r = (1.0 / s.float()).unsqueeze(-1).expand_as(scaled)
            recip = (blocks.float() * r)[keep].double()
        conv = diagnose.element_conventions(x, sch.elem_name, reciprocal=recip)
    lines.append(diagnose.describe(a_codes, e_codes, conv, "elements (blocks with equal scales)"))
    return lines


def assert_mx_close(actual: Any, expected: Any, scheme: Any, *, tol: Tolerance | None = None,
                    max_ulp: int | None = None, max_mismatch: float | None = None, scale_ulp: int = 0,
                    max_rel_l2: float | None = None, min_sqnr_db: float | None = None,
                    source: torch.Tensor | None = None, layout: str = "linear", expected_layout: str = "linear",
                    op: str = "", dtype: str = "", msg: Msg = None, nan_equal: bool = False) -> None:
    """Assert that block-scaled ``actual`` is ``expected`` within the rules of the module docstring.

    ``actual`` / ``expected``: ``(codes, scales)`` (MX) or ``(codes, scales, global_scale)`` (NVFP4), as
    ``harness.mx.quantize_mx`` / ``quantize_nvfp4`` return them. ``scheme``: ``mxfp4``, ``nvfp4``, ... or an
    ``mx_case``. ``tol``: a code row of the table (its max_ulp and max_mismatch apply to elements), or
    ``max_ulp=`` / ``max_mismatch=`` (default 0: bit-exact). ``layout``: how actual's scales are laid out
    (``swizzled``: the 128x4 layout, unswizzled here). ``source``: the tensor both were quantized from; it adds
    the SQNR figures and, on failure, the diagnosis line. ``msg``: a str becomes the first line; a callable gets the
    report. ``nan_equal``: let NaN (scales, element codes, the global scale) pass facing NaN at the same place.
    """
    __tracebackhide__ = True
    check_msg(msg)
    t = _tol(tol, max_ulp, max_mismatch)
    m = check_mx(actual, expected, scheme, tol=t, scale_ulp=scale_ulp, max_rel_l2=max_rel_l2,
                 min_sqnr_db=min_sqnr_db, source=source, layout=layout, expected_layout=expected_layout, op=op,
                 dtype=dtype, nan_equal=nan_equal)
    if m is not None:
        if msg is not None:
            m.msg = msg
        raise AssertionError(format_mx_mismatch(m))
