"""Codec-policy diagnosis: which known conversion convention produced a tensor of codes, given its source values.

Why: most FP8/FP4 "kernel bugs" are policy mismatches between a kernel and its reference (saturating or not,
RNE or RZ, which e8m0 scale rule, divide or multiply by a reciprocal). When codes differ, knowing that the actual
codes are exactly another known convention's turns a hunt into a one-line fix. Each convention here is computed
from the source and compared code for code; :func:`describe` is the line a failure text carries.

FP8 conventions (:func:`fp8_conventions`): ``harness.fp8.encode`` per NVIDIA target (sm80, sm89, sm90: Triton
3.6's lowering, satfinite on sm89+), torch's ``.to(float8)`` (RNE, not saturating: overflow becomes NaN for e4m3,
inf for e5m2), the same through ml_dtypes when it is installed (a test dependency), and RZ (truncation, saturating).
Microscaled elements (:func:`element_conventions`, given the block scales the kernel chose): ``harness.mx.encode``
satfinite RNE, ml_dtypes' RNE (saturate=False), RZ, and for NVFP4 the fp32 reciprocal product instead of the exact
quotient. Scales (:func:`scale_conventions`): the e8m0 rules floor/ceil/even/rceil and older triton_kernels'
``amax / 6`` with its exponent floored (``ROUND_DOWN``); NVFP4's ue4m3 scale as
``amax / 6 / g`` (torchao's order), ``amax / (6 g)`` and ``amax * (1 / (6 g))``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from harness.mx.formats import RZ, e8m0_scale, encode, get_mx_format
from harness.names import NAMES

__all__ = ["Match", "describe", "diagnose_fp8", "element_conventions", "fp8_conventions", "fp8_policy_msg", "match",
           "scale_conventions"]

#: A convention's label and how many codes it gets wrong.
Match = tuple[str, int]  # (label, differing codes)


def _fp8_rz(x: torch.Tensor, f: Any) -> torch.Tensor:
    from harness import fp8

    xf = x.float()
    codes = xf.clamp(-f.sat_max, f.sat_max).to(f.torch_dtype).view(torch.uint8)
    over = fp8.decode(codes, f).abs() > xf.abs()  # RNE went away from zero: one code back toward it
    mag = (codes & 0x7F).to(torch.int16) - over.to(torch.int16)
    return ((codes & 0x80) | mag.clamp_min(0).to(torch.uint8)).to(torch.uint8)


def fp8_conventions(source: torch.Tensor, fmt: Any) -> dict[str, Callable[[], torch.Tensor]]:
    """Label -> thunk computing the codes that convention gives ``source`` in ``fmt`` (an FP8 format)."""
    from harness import fp8

    f = fp8.get_format(fmt)
    out: dict[str, Callable[[], torch.Tensor]] = {}
    for arch in ("sm90", "sm89", "sm80"):
        label = f"harness.fp8.encode arch={arch}" + (" (RNE satfinite)" if arch != "sm80" else "")
        out[label] = lambda arch=arch: fp8.encode(source, f, arch=arch)
    if f.torch_dtype is not None:
        out["torch .to(float8), no clamp"] = lambda: source.float().to(f.torch_dtype).view(torch.uint8)
        try:
            import ml_dtypes
        except ImportError:  # a test dependency: without it the convention is not offered
            ml_dtypes = None
        name = NAMES[f.name].ml_dtypes
        if ml_dtypes is not None and name is not None:
            dt = getattr(ml_dtypes, name)
            out["ml_dtypes (RNE, not saturating)"] = lambda: torch.from_numpy(
                source.detach().float().cpu().numpy().astype(dt).view("uint8").copy())
        out["RZ (truncation, saturating)"] = lambda: _fp8_rz(source, f)
    return out


def element_conventions(scaled: torch.Tensor, elem: str, *, reciprocal: torch.Tensor | None = None
                        ) -> dict[str, Callable[[], torch.Tensor]]:
    """Label -> thunk for the element codes of ``scaled`` (source / block scale, exact, float64) in ``elem``
    (e2m1, e2m3, e3m2). ``reciprocal``: NVFP4's source times the fp32 reciprocal of its scale, the quotient a
    kernel that multiplies instead of dividing rounds."""
    out: dict[str, Callable[[], torch.Tensor]] = {
        "harness.mx.encode RNE satfinite": lambda: encode(scaled, elem),
        "ml_dtypes RNE (harness.mx.encode saturate=False)": lambda: encode(scaled, elem, saturate=False),
        "RZ satfinite": lambda: encode(scaled, elem, rounding=RZ),
    }
    if reciprocal is not None:
        out["RNE satfinite of x * fp32(1 / scale)"] = lambda: encode(reciprocal, elem)
    return out


def scale_conventions(amax: torch.Tensor, scheme: Any, global_scale: torch.Tensor | None = None
                      ) -> dict[str, Callable[[], torch.Tensor]]:
    """Label -> thunk for the block-scale codes of blocks of absolute maximum ``amax`` under ``scheme``."""
    if scheme.scale == "e8m0":
        out = {f"e8m0 rule {r!r}": (lambda r=r: e8m0_scale(amax, scheme.elem, r))
               for r in ("floor", "ceil", "even", "rceil")}
        top = get_mx_format(scheme.elem).max_finite
        out[f"e8m0 of amax / {top:g} with its exponent floored (older triton_kernels' ROUND_DOWN)"] = (
            lambda: _exponent_of_quotient(amax, top))
        return out
    g = torch.as_tensor(global_scale if global_scale is not None else 1.0, dtype=torch.float32)
    a = amax.float()
    return {
        "ue4m3 of amax / 6 / g (torchao order)": lambda: encode(a / 6.0 / g, "ue4m3"),
        "ue4m3 of amax / (6 * g)": lambda: encode(a / (6.0 * g), "ue4m3"),
        "ue4m3 of amax * fp32(1 / (6 * g))": lambda: encode(a * (1.0 / (6.0 * g)), "ue4m3"),
    }


def _exponent_of_quotient(amax: torch.Tensor, top: float) -> torch.Tensor:
    """triton_kernels' ``DequantScaleRoundingMode.ROUND_DOWN``: the exponent field of the fp32 quotient
    ``amax / top`` (``bits & 0x7F800000``), i.e. 2^floor(log2(amax / 6)) for e2m1, where OCP's floor rule is
    2^(floor(log2 amax) - 2). The quotient is divided as the kernel's ``max_val / 6.0`` is on the GPU
    (``div.full.f32``, :func:`harness.interp.approx_math.div_full`)."""
    from harness.interp.approx_math import div_full

    q = div_full(amax.float().abs(), torch.full_like(amax, top, dtype=torch.float32))
    return ((q.view(torch.int32) >> 23) & 0xFF).to(torch.uint8)


def _same(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.to("cpu", torch.uint8).reshape(-1) == b.to("cpu", torch.uint8).reshape(-1)


def match(codes: torch.Tensor, conventions: dict[str, Callable[[], torch.Tensor]]) -> list[Match]:
    """(label, codes that differ) per convention that could be computed, fewest differences first."""
    out = []
    for label, thunk in conventions.items():
        try:
            want = thunk()
        except (ValueError, TypeError):  # e.g. e4nv on sm80: that convention does not exist there
            continue
        if want.shape != codes.shape:
            continue
        out.append((label, int((~_same(codes, want)).sum())))
    return sorted(out, key=lambda m: m[1])


def _one(what: str, matches: list[Match], n: int) -> str:
    exact = [label for label, k in matches if k == 0]
    if exact:
        return f"{what} matches {' = '.join(exact)}"
    if not matches:
        return f"{what} matches no known convention"
    label, k = matches[0]
    return f"{what} matches no known convention (closest: {label}, {k} / {n} codes differ)"


def describe(actual: torch.Tensor, expected: torch.Tensor, conventions: dict[str, Callable[[], torch.Tensor]],
             what: str = "") -> str:
    """One line: which convention the actual codes are, and which the expected ones are. Thunks run once."""
    cache: dict[str, torch.Tensor] = {}

    def memo(label: str, thunk: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
        def run() -> torch.Tensor:
            if label not in cache:
                cache[label] = thunk()
            return cache[label]
        return run

    conv = {label: memo(label, t) for label, t in conventions.items()}
    n = actual.numel()
    prefix = f"{what}: " if what else ""
    return f"{prefix}{_one('actual', match(actual, conv), n)}; {_one('expected', match(expected, conv), n)}"


def diagnose_fp8(source: torch.Tensor, actual: torch.Tensor, expected: torch.Tensor | None, fmt: Any) -> str:
    """The diagnosis line for FP8 codes cast from ``source``: which convention ``actual`` (and ``expected``) is."""
    from harness import fp8

    conv = fp8_conventions(source, fmt)
    a = fp8.as_codes(actual, fmt, name="actual")
    if expected is None:
        return _one("actual", match(a, conv), a.numel())
    return describe(a, fp8.as_codes(expected, fmt, name="expected"), conv)


def fp8_policy_msg(source: torch.Tensor, actual: torch.Tensor, expected: torch.Tensor, fmt: Any
                   ) -> Callable[[str], str]:
    """A ``msg=`` for ``harness.assert_fp8_close`` / ``assert_fp8_within_one_ulp`` that appends the diagnosis line
    to their failure text (computed only when the assert fails)::

        assert_fp8_close(got, want, "e4nv", msg=fp8_policy_msg(x, got, want, "e4nv"))
    """

    def add(text: str) -> str:
        return f"{text}\nDiagnosis: {diagnose_fp8(source, actual, expected, fmt)}"

    return add
