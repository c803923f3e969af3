"""Can this assertion fail? Every harness assertion that passed is asked again, in the same test, about wrong
answers built from its own inputs (``--harness-vacuity``).

Why: a low-precision check fails in a particular way: it passes when the kernel is wrong (a tolerance row loose
enough to take a layout bug, a NaN inside a mismatch budget, a top-k check that takes any selection). The harness
owns the assertions and their tolerance rows, so it can try the wrong answers a kernel gets wrong and say which
the assertion would have accepted, and which row let it.

The wrong answers are derived from the expected side (the reference the check was given), so they are wrong by
construction and the same on every run:

* the tolerance's own step, past it: one step (an ULP of the compared dtype, or the first error beyond
  ``atol + rtol*|x|``; ``max_ulp + 1`` codes) at one more element than ``max_mismatch`` allows, and everywhere;
* two adjacent rows, columns or 32-element blocks swapped; a square tile transposed;
* one NaN; one sign flip (at the largest magnitude);
* MX: a block scale zeroed, one scale one code off, linear scales read as swizzled, two blocks swapped, an
  element off;
* top-k: the lowest selected index replaced by the lowest-scored non-selected column (none when every column
  ties).

A corruption that leaves the tensor unchanged (rows that are equal, a symmetric tile) is not a wrong answer and is
not tried. Each check is asked through a predicate that reruns the same check on the candidate with the session's
observations suspended, so the outcome of the assertion itself never changes.

This module imports without pytest; :mod:`harness.vacuity.plugin` holds the options, the marker and the report.
"""

from __future__ import annotations

import contextlib
import math
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.session import current

__all__ = ["SECTION", "Corruption", "Finding", "State", "active", "float_corruptions", "fp8_corruptions",
           "mx_corruptions", "probe", "probing", "topk_corruptions"]

#: The session section's name, and the ``--harness-report`` key.
SECTION = "vacuity"
#: Block size of the "two adjacent blocks swapped" corruption of plain tensors (the MX block).
BLOCK = 32
#: The side of the transposed tile (smaller when the tensor is).
TILE = 16

_probing = 0


@dataclass(frozen=True)
class Corruption:
    """One wrong answer: what was done (``name``), where (``detail``), how to build it (``make``) and how large it
    is (``size``: the relative L2 change of the values, ``inf`` for a NaN; computed only for an accepted one)."""

    name: str
    detail: str
    size: Callable[[], float] = field(repr=False, compare=False)
    make: Callable[[], Any] = field(repr=False, compare=False)


@dataclass
class Finding:
    """An assertion that accepted wrong answers."""

    test: str
    where: str
    assertion: str
    op: str
    dtype: str
    tol: str
    row: dict[str, Any]
    accepted: list[dict[str, Any]]
    smallest: str
    justified: str | None = None

    def lines(self) -> list[str]:
        head = f"{self.test} ({self.where}): {self.assertion} [{self.op or '-'}/{self.dtype or '-'}] accepted " \
               f"{len(self.accepted)} wrong answer(s) under {self.tol}"
        out = [head]
        fields = ", ".join(f"{k}={v}" for k, v in self.row.items() if v not in (None, 0, 0.0, "", False))
        out.append(f"    tolerance row: {fields or 'exact'}")
        out.append(f"    smallest: {self.smallest}")
        for a in self.accepted:
            out.append(f"    - {a['corruption']}: {a['detail']}")
        if self.justified is not None:
            out.append(f"    justified: {self.justified}")
        return out


class State:
    """The session's ``vacuity`` section: the mode, the findings and what the probing cost."""

    def __init__(self, mode: str) -> None:
        if mode not in ("report", "fail"):
            raise ValueError(f"vacuity mode: expected 'report' or 'fail'; got {mode!r}")
        self.mode = mode
        self.findings: list[Finding] = []
        self.assertions = 0
        self.candidates = 0
        self.seconds = 0.0
        self.slowest: dict[str, float] = {}  # test -> seconds spent probing its assertions
        self.errors: list[str] = []  # assertions whose wrong answers could not be built (a bug here, not a finding)
        #: the test being run and its ``vacuity_ok`` reason (set by the plugin)
        self.test = ""
        self.justify: Callable[[str], str | None] = lambda name: None

    def of_test(self, nodeid: str) -> list[Finding]:
        return [f for f in self.findings if f.test == nodeid]

    def to_worker(self) -> dict[str, Any]:
        return {"findings": [asdict(f) for f in self.findings], "assertions": self.assertions,
                "candidates": self.candidates, "seconds": self.seconds, "slowest": self.slowest,
                "errors": self.errors}

    def merge(self, data: dict[str, Any]) -> None:
        self.findings.extend(Finding(**f) for f in data.get("findings", ()))
        self.assertions += int(data.get("assertions", 0))
        self.candidates += int(data.get("candidates", 0))
        self.seconds += float(data.get("seconds", 0.0))
        self.errors.extend(data.get("errors", ()))
        for k, v in data.get("slowest", {}).items():
            self.slowest[k] = self.slowest.get(k, 0.0) + float(v)

    def report(self) -> dict[str, Any]:
        return {"mode": self.mode, "assertions": self.assertions, "candidates": self.candidates,
                "seconds": round(self.seconds, 3), "slowest": self._slowest(), "errors": self.errors,
                "vacuous": sum(f.justified is None for f in self.findings),
                "justified": sum(f.justified is not None for f in self.findings),
                "findings": [asdict(f) for f in sorted(self.findings, key=lambda f: (f.test, f.where))]}

    def _slowest(self, n: int = 5) -> dict[str, float]:
        """The tests whose probing took longest (where the check's cost goes)."""
        top = sorted(self.slowest.items(), key=lambda kv: -kv[1])[:n]
        return {k: round(v, 3) for k, v in top}

    def lines(self) -> list[str]:
        out = [f"{self.assertions} passing assertion(s) asked about {self.candidates} wrong answer(s) in "
               f"{self.seconds:.2f}s: {sum(f.justified is None for f in self.findings)} vacuous, "
               f"{sum(f.justified is not None for f in self.findings)} justified"]
        out.extend(f"not asked (could not build its wrong answers): {e}" for e in self.errors)
        slow = self._slowest(3)
        if slow:
            out.append("slowest to probe: " + ", ".join(f"{k} {v:.2f}s" for k, v in slow.items()))
        for f in sorted(self.findings, key=lambda f: (f.test, f.where)):
            out.extend(f.lines())
        return out


def probing() -> bool:
    """Inside a probe: a check may skip what only a failure message needs (a diagnosis)."""
    return _probing > 0


def active() -> State | None:
    """The running session's vacuity state when the check is on and a passing assertion should be probed: not
    while probing, not where checks are not recorded (``unreported`` self-tests, ``summary.suspended``)."""
    if _probing:
        return None
    s = current()
    if s is None or s.observations.paused:
        return None
    st = s.sections.get(SECTION)
    return st if isinstance(st, State) else None


@contextlib.contextmanager
def _asking(s: Any) -> Iterator[None]:
    global _probing
    _probing += 1
    try:
        with s.observations.suspended():
            yield
    finally:
        _probing -= 1


def _caller() -> str:
    """file:line of the first frame outside the harness package (the test's assertion)."""
    for fr in reversed(traceback.extract_stack()[:-2]):
        p = fr.filename.replace("\\", "/")
        if "/harness/" not in p or "/tests/" in p:
            return f"{p.rsplit('/tests/', 1)[-1] if '/tests/' in p else p.rsplit('/', 1)[-1]}:{fr.lineno}"
    return "?"


def _measured(c: Corruption, st: State, s: Any, assertion: str) -> float:
    """``c``'s size, or ``inf`` where it cannot be measured (the values of an accepted answer may not decode: a NaN
    NVFP4 global scale, which ``nan_equal`` lets pass): the finding stands, said in the report, never raised."""
    try:
        return float(c.size())
    except Exception as e:  # noqa: BLE001 - a size is a ranking aid; the finding itself is the result
        st.errors.append(f"{st.test or s.observations.current_test}: {assertion}: the size of '{c.name}': "
                         f"{type(e).__name__}: {e}")
        return math.inf


def probe(assertion: str, accepts: Callable[[Any], bool], corruptions: Callable[[], Iterable[Corruption]], *,
          op: str, dtype: str, tol: Any, row: dict[str, Any] | None = None) -> Finding | None:
    """Ask ``accepts`` (the same check, rerun) about each corruption; record a :class:`Finding` when any passes.
    A no-op (None) unless :func:`active`. Never raises because of a corruption: a candidate the check refuses
    with an error was refused."""
    st = active()
    s = current()
    if st is None or s is None:
        return None
    t0 = time.perf_counter()
    accepted: list[Corruption] = []
    cands: list[Corruption] = []
    with _asking(s):
        try:
            cands = list(corruptions())
            for c in cands:
                cand = c.make()
                try:
                    ok = bool(accepts(cand))
                except (AssertionError, ValueError, TypeError, RuntimeError):
                    ok = False  # the check refused the candidate with an error: refused
                if ok:
                    accepted.append(c)
        except Exception as e:  # a wrong answer this module could not build: said in the report, never a failure
            st.errors.append(f"{st.test or s.observations.current_test}: {assertion}: {type(e).__name__}: {e}")
            accepted = []
    st.assertions += 1
    st.candidates += len(cands)
    finding = None
    if accepted:
        sizes = {id(c): _measured(c, st, s, assertion) for c in accepted}
        accepted.sort(key=lambda c: sizes[id(c)])
        small = accepted[0]
        key = getattr(tol, "key", "") or repr(tol)
        finding = Finding(test=st.test or s.observations.current_test, where=_caller(), assertion=assertion, op=op,
                          dtype=dtype, tol=key, row=row if row is not None else _row(tol),
                          accepted=[{"corruption": c.name, "detail": c.detail, "size": _size(sizes[id(c)])}
                                    for c in accepted],
                          smallest=f"{small.name}: {small.detail}")
        reasons = {st.justify(c.name) for c in accepted}  # justified only when every accepted one is
        finding.justified = reasons.pop() if len(reasons) == 1 else None
        st.findings.append(finding)
    dt = time.perf_counter() - t0
    st.seconds += dt
    test = st.test or s.observations.current_test
    st.slowest[test] = st.slowest.get(test, 0.0) + dt
    return finding


def _size(v: float) -> float | str:
    return "inf" if math.isinf(v) else float(f"{v:.3g}")


def _row(tol: Any) -> dict[str, Any]:
    return {k: getattr(tol, k, None) for k in ("rtol", "atol", "max_ulp", "max_mismatch", "ulp_floor")}


# ------------------------------------------------------------------------------------------ building blocks

def _torch() -> Any:
    import torch

    return torch


def _as2d(t: Any) -> Any:
    """A 2-D view (rows, last axis); a scalar is 1x1."""
    if t.dim() == 0:
        return t.reshape(1, 1)
    return t.reshape(-1, t.shape[-1])


def _rel_l2(new: Any, old: Any) -> float:
    torch = _torch()
    n, o = new.double().reshape(-1), old.double().reshape(-1)
    if bool(torch.isnan(n).any() ^ torch.isnan(o).any()) or not torch.equal(torch.isnan(n), torch.isnan(o)):
        return math.inf
    fin = torch.isfinite(n) & torch.isfinite(o)
    num = float((n[fin] - o[fin]).square().sum())
    den = float(o[fin].square().sum())
    return math.sqrt(num / den) if den > 0 else (0.0 if num == 0 else math.inf)


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN facing NaN included (a permutation that moves one NaN onto another changes nothing)."""
    torch = _torch()
    if a.is_floating_point():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return torch.equal(a, b)


def _permutations(t: Any, values: Callable[[Any], Any]) -> list[Corruption]:
    """Rows, columns, blocks of the last axis swapped and a tile transposed: layout bugs. ``values`` decodes a
    candidate (codes to floats) for its size."""
    torch = _torch()
    out: list[Corruption] = []
    shape = t.shape
    v2 = _as2d(t)
    rows, cols = v2.shape

    def add(name: str, detail: str, build: Callable[[Any], None]) -> None:
        c = v2.clone()
        build(c)
        if _same(c, v2):
            return  # not a wrong answer
        cand = c.reshape(shape)
        out.append(Corruption(name, detail, lambda cand=cand: _rel_l2(values(cand), values(t)),
                              lambda cand=cand: cand))

    def first_differing(a: Any) -> int | None:
        d = (a[1:] != a[:-1]).reshape(a.shape[0] - 1, -1).any(1).nonzero()
        return int(d[0]) if d.numel() else None

    if rows >= 2:
        i = first_differing(v2)
        if i is not None:
            add("two adjacent rows swapped", f"rows {i} and {i + 1}",
                lambda c, i=i: c.index_copy_(0, torch.tensor([i, i + 1]), v2[[i + 1, i]].clone()))
    if cols >= 2:
        j = first_differing(v2.t())
        if j is not None:
            add("two adjacent columns swapped", f"columns {j} and {j + 1}",
                lambda c, j=j: c.index_copy_(1, torch.tensor([j, j + 1]), v2[:, [j + 1, j]].clone()))
    if cols >= 2 * BLOCK:
        def swap_blocks(c: Any) -> None:
            c[:, :BLOCK], c[:, BLOCK:2 * BLOCK] = v2[:, BLOCK:2 * BLOCK].clone(), v2[:, :BLOCK].clone()

        add("two adjacent blocks swapped", f"elements [0:{BLOCK}] and [{BLOCK}:{2 * BLOCK}] of the last axis, "
            "every row", swap_blocks)
    side = 1 << int(math.log2(max(1, min(rows, cols, TILE))))
    if side >= 2:
        def transpose(c: Any, s: int = side) -> None:
            c[:s, :s] = v2[:s, :s].t().clone()

        add("a tile transposed", f"the {side}x{side} tile at (0, 0)", transpose)
    return out


# ------------------------------------------------------------------------------------------ float

_MANT = {"float16": 10, "bfloat16": 7, "float32": 23, "float64": 52}
_MIN_EXP = {"float16": -14, "bfloat16": -126, "float32": -126, "float64": -1022}


def _ulp(e: Any, dtype: Any) -> Any:
    """One ULP of ``dtype`` at |e| (float64), subnormals included."""
    torch = _torch()
    name = str(dtype).replace("torch.", "")
    mant, lo = _MANT.get(name, 52), _MIN_EXP.get(name, -1022)
    ex = torch.floor(torch.log2(e.abs().clamp_min(2.0 ** lo)))
    return torch.exp2(ex.clamp_min(lo) - mant)


def float_corruptions(actual: Any, expected: Any, tol: Any, *, scale: Any = None,
                      equal_nan: bool = False) -> list[Corruption]:
    """Wrong answers for a float check (:func:`harness.compare.checks.check_close`), in float64, built from
    ``expected``. ``scale``: the check's scale (already broadcast), which sets the allowed error."""
    torch = _torch()
    e = expected.detach().to("cpu", torch.float64)
    shape, n = e.shape, e.numel()
    if n == 0 or tuple(actual.shape) != tuple(shape):
        return []
    flat = e.reshape(-1)
    fin = torch.isfinite(flat)
    base = flat.abs() if scale is None else torch.as_tensor(scale, dtype=torch.float64).broadcast_to(shape).reshape(-1)
    allowed = tol.atol + tol.rtol * base
    ulp = _ulp(flat, actual.dtype)
    # the smallest error of the compared dtype's grid past the allowed one: one ULP when the row is exact
    step = (torch.floor(allowed / ulp) + 1) * ulp
    past = "1 ULP" if float(allowed.max()) == 0 else "one ULP past the tolerance"
    out: list[Corruption] = []
    k = math.floor(tol.max_mismatch * n + 1e-9) + 1
    nfin = int(fin.sum())
    mag = torch.where(fin, flat.abs(), -1.0)

    def off(where: Any) -> Any:
        c = flat.clone()
        c[where] = flat[where] + torch.where(flat[where] < 0, -step[where], step[where])
        return c.reshape(shape)

    if nfin >= k:
        few = mag.topk(k).indices
        c = off(few)
        out.append(Corruption(f"{past} at a few elements", f"{k} element(s) (max_mismatch allows {k - 1}), the "
                              f"largest, each off by {_g(float(step[few].max()))}", lambda c=c: _rel_l2(c, e),
                              lambda c=c: c))
        if nfin > k:
            idx = fin.nonzero().reshape(-1)
            c = off(idx)
            out.append(Corruption(f"{past} everywhere", f"all {nfin} finite elements", lambda c=c: _rel_l2(c, e),
                                  lambda c=c: c))
    if nfin:
        i = int(mag.argmax())
        c = flat.clone()
        c[i] = math.nan
        out.append(Corruption("one NaN", f"at flat index {i}", lambda: math.inf, lambda c=c: c.reshape(shape)))
        if flat[i] != 0:
            c = flat.clone()
            c[i] = -c[i]
            out.append(Corruption("one sign flip", f"at flat index {i} ({_g(float(flat[i]))})",
                                  lambda c=c: _rel_l2(c, flat), lambda c=c: c.reshape(shape)))
    out.extend(_permutations(e, lambda t: t))
    return out


def _g(v: float) -> str:
    return f"{v:.4g}"


# ------------------------------------------------------------------------------------------ fp8 codes

def fp8_corruptions(expected_codes: Any, fmt: Any, *, max_ulp: int, floor: float, max_mismatch: float
                    ) -> list[Corruption]:
    """Wrong answers for an FP8 code check (:func:`harness.compare.checks.check_fp8_mixed`), as uint8 codes."""
    torch = _torch()
    from harness import fp8

    f = fp8.get_format(fmt)
    e = fp8.as_codes(expected_codes, f).detach().cpu()
    shape, n = e.shape, e.numel()
    if n == 0:
        return []
    flat = e.reshape(-1)
    val = fp8.decode(flat, f).double()
    special = fp8.is_nan_code(flat, f) | fp8.is_inf_code(flat, f)
    out: list[Corruption] = []
    d = max_ulp + 1
    mag = (flat & 0x7F).to(torch.int32)
    moved = ((flat.to(torch.int32) & 0x80) | (mag - d).clamp_min(0)).to(torch.uint8)
    # a move toward zero by max_ulp + 1 codes that the value floor does not cover either
    movable = ~special & (mag >= d + 1) & ((fp8.decode(moved, f).double() - val).abs() > floor)
    k = math.floor(max_mismatch * n + 1e-9) + 1
    if int(movable.sum()) >= k:
        few = torch.where(movable, val.abs(), -1.0).topk(k).indices
        c = flat.clone()
        c[few] = moved[few]
        out.append(Corruption(f"{d} code(s) off at a few elements", f"{k} element(s) (max_mismatch allows "
                              f"{k - 1}), the largest", lambda c=c: _rel_l2(fp8.decode(c, f), val),
                              lambda c=c: c.reshape(shape)))
        if int(movable.sum()) > k:
            c = torch.where(movable, moved, flat)
            out.append(Corruption(f"{d} code(s) off everywhere", f"all {int(movable.sum())} elements that can move",
                                  lambda c=c: _rel_l2(fp8.decode(c, f), val), lambda c=c: c.reshape(shape)))
    fin_nz = ~special & (val != 0)
    if bool(fin_nz.any()):
        i = int(torch.where(fin_nz, val.abs(), -1.0).argmax())
        c = flat.clone()
        c[i] = c[i] ^ 0x80
        out.append(Corruption("one sign flip", f"at flat index {i} ({_g(float(val[i]))})",
                              lambda c=c: _rel_l2(fp8.decode(c, f), val), lambda c=c: c.reshape(shape)))
    nan_code = {"fn": 0x7F, "ieee": 0x7F, "fnuz": 0x80}.get(f.nan_style)
    if nan_code is not None and bool((~special).any()):
        i = int(torch.where(~special, val.abs(), -1.0).argmax())
        c = flat.clone()
        c[i] = nan_code
        out.append(Corruption("one NaN", f"code {nan_code:#04x} at flat index {i}", lambda: math.inf,
                              lambda c=c: c.reshape(shape)))
    out.extend(_permutations(e, lambda t: fp8.decode(t, f)))
    return out


# ------------------------------------------------------------------------------------------ MX

_SIGN_BIT = {"e2m1": 0x8, "e2m3": 0x20, "e3m2": 0x20, "e4m3": 0x80, "e5m2": 0x80}
_SCALE_NAN = {"e8m0": 0xFF, "ue4m3": 0x7F}


def mx_corruptions(expected: Any, scheme: Any, *, expected_layout: str, max_ulp: int, max_mismatch: float
                   ) -> list[Corruption]:
    """Wrong answers for :func:`harness.mx.compare.check_mx`: tuples in the linear scale layout (the check is
    asked with ``layout='linear'``)."""
    torch = _torch()
    from harness.mx.blocks import pack_fp4
    from harness.mx.compare import _parts, _scales
    from harness.mx.layouts import swizzled_shape, unswizzle_scales
    from harness.mx.schemes import get_scheme

    sch = get_scheme(scheme)
    codes, scales, g = _parts(expected, sch, "expected")
    el = sch.element_codes(codes)
    if el.numel() == 0 or el.shape[-1] % sch.block:
        return []
    scales = _scales(scales, expected_layout, el, sch.block, "expected_layout", "expected")
    tail = () if g is None else (g,)
    ref_q = (codes, scales, *tail)

    def pack(e: Any) -> Any:
        return pack_fp4(e) if sch.packed else e

    out: list[Corruption] = []

    def add(name: str, detail: str, e: Any, s: Any) -> None:
        if torch.equal(e, el) and torch.equal(s, scales):
            return
        q = (pack(e), s, *tail)
        out.append(Corruption(name, detail, lambda q=q: _rel_l2(sch.dequantize(q), sch.dequantize(ref_q)),
                              lambda q=q: q))

    blocks = el.reshape(*el.shape[:-1], -1, sch.block)
    live = (blocks != 0).any(-1).reshape(-1)  # blocks with a nonzero element code (a scale there shows)
    sflat = scales.reshape(-1)
    if bool(live.any()):
        b = int(live.nonzero()[0])
        if int(sflat[b]) != 0:
            s = sflat.clone()
            s[b] = 0
            add("a scale block zeroed", f"block {b} (code {int(sflat[b]):#04x} -> 0x00)", el, s.reshape(scales.shape))
        top = 0xFE if sch.scale == "e8m0" else 0x7E
        s = sflat.clone()
        s[b] = s[b] + 1 if int(s[b]) < top else s[b] - 1
        add("a scale one code off", f"block {b} (code {int(sflat[b]):#04x} -> {int(s[b]):#04x})", el,
            s.reshape(scales.shape))
        s = sflat.clone()
        s[b] = _SCALE_NAN[sch.scale]
        add("one NaN", f"block {b}'s scale is the NaN code {_SCALE_NAN[sch.scale]:#04x}", el, s.reshape(scales.shape))
    if el.dim() == 2 and scales.dim() == 2:
        rows, cols = scales.shape
        R, C = swizzled_shape(rows, cols)
        buf = torch.zeros(R * C, dtype=torch.uint8)
        buf[: rows * cols] = scales.reshape(-1)
        add("linear scales read as swizzled", f"the ({rows}, {cols}) scales' bytes unswizzled as a {R}x{C} buffer",
            el, unswizzle_scales(buf, rows, cols))
    if blocks.shape[-2] >= 2:
        e2, s2 = blocks.clone(), scales.clone()
        e2[..., [0, 1], :] = blocks[..., [1, 0], :]
        s2[..., [0, 1]] = scales[..., [1, 0]]
        add("two adjacent blocks swapped", "blocks 0 and 1 of every row (codes and scales)", e2.reshape(el.shape), s2)
    sign = _SIGN_BIT[sch.elem_name]
    mag = (el.to(torch.int32) & (sign - 1)).reshape(-1)
    d = max_ulp + 1
    movable = mag >= d + 1
    k = math.floor(max_mismatch * el.numel() + 1e-9) + 1
    if int(movable.sum()) >= k:
        few = torch.where(movable, mag, -1).topk(k).indices
        e2 = el.reshape(-1).clone()
        e2[few] = ((e2[few].to(torch.int32) & sign) | (mag[few] - d)).to(torch.uint8)
        add(f"{d} element code(s) off at a few elements", f"{k} element(s) (max_mismatch allows {k - 1})",
            e2.reshape(el.shape), scales)
    nz = mag > 0
    if bool(nz.any()):
        i = int(torch.where(nz, mag, -1).argmax())
        e2 = el.reshape(-1).clone()
        e2[i] = e2[i] ^ sign
        add("one sign flip", f"element at flat index {i}", e2.reshape(el.shape), scales)
    return out


# ------------------------------------------------------------------------------------------ top-k

def topk_corruptions(indices: Any, ref_scores: Any, *, k: int, visible: Any, pad: int) -> list[Corruption]:
    """Wrong answers for :func:`harness.topk.check_topk_multiset_equal`: in one row, the lowest-scored selected
    index replaced by the lowest-scored non-selected visible column (a column no top-k holds, unless every
    column ties: then there is no wrong answer). The row whose replacement is largest relative to its scores is
    taken (the clearest wrong answer; an assertion that takes it takes any selection)."""
    torch = _torch()
    idx = indices.detach().to("cpu", torch.long)
    ref = ref_scores.detach().to("cpu", torch.float64)
    if ref.dim() == 1:
        ref = ref[None]
    if idx.dim() == 1:
        idx = idx[None]
    if idx.dim() != 2 or ref.dim() != 2 or idx.shape[0] != ref.shape[0] or idx.numel() == 0:
        return []
    rows, n = ref.shape
    if visible is None:
        vis = torch.full((rows,), n)
    elif isinstance(visible, int):
        vis = torch.full((rows,), visible)
    else:
        vis = torch.as_tensor(visible).to("cpu", torch.long).reshape(-1).broadcast_to((rows,))
    real = (idx != pad) & (idx >= 0) & (idx < n)
    best: tuple[float, int, int, int] | None = None
    for r in range(min(rows, 256)):
        sel = idx[r][real[r]]
        if sel.numel() == 0:
            continue
        s = ref[r, sel]
        if bool(torch.isnan(s).any()):
            continue
        j = int(s.argmin())
        low = float(s[j])
        mask = torch.zeros(n, dtype=torch.bool)
        mask[: int(vis[r])] = True
        mask[sel] = False
        cand = torch.where(mask & (ref[r] < low) & ~torch.isnan(ref[r]), ref[r], math.inf)
        if not bool(torch.isfinite(cand).any()):
            continue
        c = int(cand.argmin())
        gap = (low - float(cand[c])) / max(abs(low), 1e-300)
        if best is None or gap > best[0]:
            pos = int(real[r].nonzero()[j])
            best = (gap, r, pos, c)
    if best is None:
        return []
    gap, r, pos, c = best
    cand_idx = indices.detach().clone()
    view = cand_idx if cand_idx.dim() == 2 else cand_idx[None]
    old = int(view[r, pos])
    view[r, pos] = c
    return [Corruption("one top-k index replaced by a non-selected one",
                       f"row {r}: column {old} (score {_g(float(ref[r, old]))}) -> column {c} "
                       f"(score {_g(float(ref[r, c]))})", lambda: gap, lambda t=cand_idx: t)]
