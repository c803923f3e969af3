"""The architecture model: which lane a test runs on, and what that lane can do.

Tolerances, FP8 support and skip decisions all key on an :class:`Arch`. The Triton interpreter is an arch
of its own (``interp``) because its numerics differ from every GPU's.
"""

from __future__ import annotations

import difflib
import numbers
import os
import re
import sys
from dataclasses import dataclass
from typing import Any

from harness.names import format_name
from harness.versions import triton_at_least, triton_version

__all__ = [
    "Arch",
    "parse_arch",
    "detect_arch",
    "supports_format",
    "supports_scaled_dot",
    "supports_scaled_dot_emulation",
    "supports_int8_dot",
    "supports_bf16_arithmetic",
    "interpreting",
    "ENV_ARCH",
    "KNOWN_ARCHS",
]

#: Environment variable that overrides detection (same meaning as ``--harness-arch``).
ENV_ARCH = "HARNESS_ARCH"

# Members that fall back to a family: binaries and numerics of these are shared with the family head.
# sm89 (Ada) is deliberately its own family: it is the first with FP8 tensor cores, so sm80 rows must not
# silently apply to it.
_CUDA_FAMILY = {
    86: 80, 87: 80,
    103: 100, 110: 100,
    121: 120,
}


#: The CUDA capabilities NVIDIA has published (CUDA C++ Programming Guide, "Compute Capabilities"; CUDA 12.8-12.9
#: called Thor sm101, CUDA 13.0 sm110). A name outside them (``sm91``, ``sm900``) is a typo, not a GPU.
_KNOWN_CC = (30, 32, 35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121)
#: The GFX9-and-later processors of LLVM's AMDGPU backend (llvm.org/docs/AMDGPUUsage.html, "Processors"), the
#: range Triton's AMD backend targets.
_KNOWN_GFX = ("gfx900", "gfx902", "gfx904", "gfx906", "gfx908", "gfx909", "gfx90a", "gfx90c", "gfx940", "gfx941",
              "gfx942", "gfx950", "gfx1010", "gfx1011", "gfx1012", "gfx1013", "gfx1030", "gfx1031", "gfx1032",
              "gfx1033", "gfx1034", "gfx1035", "gfx1036", "gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150",
              "gfx1151", "gfx1152", "gfx1153", "gfx1200", "gfx1201")
#: Every arch name :func:`parse_arch` accepts (a user's ``--harness-arch``, ``HARNESS_ARCH``, markers, table rows).
KNOWN_ARCHS: tuple[str, ...] = ("interp", "cpu", *(f"sm{cc}" for cc in _KNOWN_CC), *_KNOWN_GFX)


_SM_NAME = re.compile(r"sm([1-9][0-9]{1,2})")
_GFX = re.compile(r"gfx[0-9]{2,3}[0-9a-f]")


@dataclass(frozen=True)
class Arch:
    """One execution lane: ``interp``, ``cpu``, ``smXY`` (CUDA) or ``gfxNNN`` (ROCm).

    Name, kind and capability must agree (the well-formedness rules of ``parse_arch(..., known=False)``; the
    table of known GPUs is parse_arch's, so a detected GPU newer than it still constructs): families, ``at_least``
    and table lookups each read a different one of the three, so a disagreeing Arch would be judged as two GPUs
    at once. A CUDA arch's capability follows from its name; left out, it is derived."""

    name: str
    kind: str
    capability: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"Arch.name must be a str such as 'sm90', 'gfx942' or 'interp', got "
                            f"{type(self.name).__name__}")
        if self.kind not in ("interp", "cpu", "cuda", "rocm"):
            raise ValueError(f"Arch.kind must be one of interp, cpu, cuda, rocm; got {self.kind!r}")
        cap = self.capability
        if cap is not None:
            if (not isinstance(cap, (tuple, list)) or len(cap) != 2
                    or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in cap)):
                raise TypeError(f"Arch.capability must be None or a (major, minor) tuple of ints such as (9, 0), "
                                f"got {cap!r}")
            cap = (int(cap[0]), int(cap[1]))
        if self.kind == "cuda":
            m = _SM_NAME.fullmatch(self.name)
            if m is None or int(m.group(1)) < 30:
                raise ValueError(f"Arch.name {self.name!r} is not a CUDA arch name; expected 'smXY' with capability "
                                 f"3.0 or later, lower case and without a target suffix (e.g. 'sm90'; "
                                 f"parse_arch reads other spellings such as 'sm_90a')")
            derived = divmod(int(m.group(1)), 10)
            if cap is not None and cap != derived:
                raise ValueError(f"Arch.capability {cap} disagrees with Arch.name {self.name!r}; expected {derived} "
                                 f"or None")
            object.__setattr__(self, "capability", derived)
            return
        if cap is not None:
            raise ValueError(f"Arch.capability is a CUDA compute capability; a {self.kind} arch has none, got {cap}")
        if self.kind == "rocm" and not _GFX.fullmatch(self.name):
            raise ValueError(f"Arch.name {self.name!r} is not a ROCm processor name; expected lower-case 'gfxNNN' "
                             f"(e.g. 'gfx942', 'gfx90a')")
        if self.kind in ("interp", "cpu") and self.name != self.kind:
            raise ValueError(f"Arch.name must be {self.kind!r} for kind {self.kind!r}, got {self.name!r}")

    @property
    def family(self) -> str:
        if self.kind == "cuda" and self.capability is not None:
            cc = self.capability[0] * 10 + self.capability[1]
            head = _CUDA_FAMILY.get(cc, cc)
            return f"sm{head}"
        if self.kind == "rocm":
            # gfx94x (MI300 line) share FP8 (fnuz) behaviour; gfx950 (MI350) differs (OCP FP8); the RDNA4
            # parts gfx1200/gfx1201 share one family (OCP FP8, WMMA).
            if re.fullmatch(r"gfx94[0-9a-f]", self.name):
                return "gfx942"
            if re.fullmatch(r"gfx120[0-9a-f]", self.name):
                return "gfx1200"
        return self.name

    def chain(self) -> tuple[str, ...]:
        """Lookup order for tables: exact name, family, kind, then the wildcard."""
        out: list[str] = []
        for key in (self.name, self.family, self.kind, "*"):
            if key not in out:
                out.append(key)
        return tuple(out)

    @property
    def cc(self) -> int | None:
        """Capability as one number (90 for sm90), or None off CUDA."""
        return None if self.capability is None else self.capability[0] * 10 + self.capability[1]

    def at_least(self, other: Arch | str) -> bool:
        """Same kind and at least ``other``'s capability (``min_arch`` semantics)."""
        o = _as_arch(other, "other")
        if self.kind != o.kind:
            return False
        if self.capability is None or o.capability is None:
            return self.name == o.name
        return self.capability >= o.capability

    def same_family(self, other: Arch | str) -> bool:
        """Exact-family match (``arch`` marker semantics): sm86 matches sm80, sm90 does not."""
        o = _as_arch(other, "other")
        return self.kind == o.kind and self.family == o.family

    @property
    def is_gpu(self) -> bool:
        return self.kind in ("cuda", "rocm")

    def __str__(self) -> str:
        return self.name


_SM = re.compile(r"(?:sm_?|compute_?)?(\d{2,3})([a-z]?)")
#: The target suffixes NVIDIA defines, with the first capability that has each: ``a`` arch-specific (sm90a,
#: wgmma), ``f`` family-specific (sm100f, CUDA 12.9). Both run on the plain arch's lane, so they parse to it.
_SM_SUFFIX_FROM = {"a": 90, "f": 100}


def _unknown(spec: str, s: str, why: str) -> ValueError:
    near = difflib.get_close_matches(s, KNOWN_ARCHS, n=1, cutoff=0.6)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return ValueError(f"arch {spec!r} {why}{hint}; known archs: {', '.join(KNOWN_ARCHS)}")


def _as_arch(value: Any, arg: str) -> Arch:
    """``value`` as an Arch: an Arch, or an arch name :func:`parse_arch` reads."""
    if isinstance(value, Arch):
        return value
    if isinstance(value, str):
        return parse_arch(value)
    raise TypeError(f"{arg} must be an Arch or an arch name such as 'sm90', got {type(value).__name__}")


def parse_arch(spec: str | Arch, *, known: bool = True) -> Arch:
    """Parse ``"sm90"``, ``"sm_90"``, ``"90"``, ``"sm90a"``, ``"sm100f"``, ``"interp"``, ``"cpu"`` or ``"gfx942"``.

    With ``known`` (the default) the name must be one of :data:`KNOWN_ARCHS`: a misspelt arch would otherwise
    be judged as a GPU that does not exist. ``known=False`` accepts any well-formed name (compile targets, whose
    own check asks the installed Triton)."""
    if isinstance(spec, Arch):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"arch must be a str or Arch (an arch name such as 'sm90'), got {type(spec).__name__}")
    s = spec.strip().lower()
    if s in ("interp", "interpreter"):
        return Arch("interp", "interp")
    if s == "cpu":
        return Arch("cpu", "cpu")
    if _GFX.fullmatch(s):
        if known and s not in _KNOWN_GFX:
            raise _unknown(spec, s, "is not a ROCm processor the harness knows")
        return Arch(s, "rocm")
    m = _SM.fullmatch(s)
    if m:
        cc = int(m.group(1))
        major, minor = divmod(cc, 10)
        if major < 3:
            raise _unknown(spec, s, f"is not understood: capability {cc} is not a CUDA architecture")
        suffix = m.group(2)
        if suffix and suffix not in _SM_SUFFIX_FROM:
            raise _unknown(spec, s, f"is not understood: NVIDIA defines no {suffix!r} target suffix; expected none, "
                           f"'a' (sm90a and later) or 'f' (sm100f and later)")
        if suffix and cc < _SM_SUFFIX_FROM[suffix]:
            raise _unknown(spec, s, f"is not understood: no sm{cc}{suffix} target exists; "
                           f"{suffix!r} targets begin at sm{_SM_SUFFIX_FROM[suffix]}{suffix}")
        if known and cc not in _KNOWN_CC:
            raise _unknown(spec, s, f"is not understood: no CUDA GPU has capability {major}.{minor}")
        return Arch(f"sm{cc}", "cuda", (major, minor))
    raise _unknown(spec, s, "is not understood; expected 'interp', 'cpu', 'smXY' (e.g. 'sm90', 'sm_89', '120') "
                   "or 'gfxNNN' (e.g. 'gfx942')")


#: The values of ``TRITON_INTERPRET`` that Triton reads as true (its ``getenv_bool``: case-insensitive, not
#: stripped; measured on Triton 3.6 and 3.9). Anything else, ``false`` and `` 1`` included, means the GPU.
_TRUTHY = frozenset({"1", "true", "yes", "on", "y"})


def interpreting() -> bool:
    """Whether ``TRITON_INTERPRET`` asks for the Triton interpreter now, by Triton's own rule.

    Read at every call, never cached: the plugin sets the variable at configure time and a nested session
    restores it. Why Triton's rule and not a looser one: ``TRITON_INTERPRET=false`` makes ``@triton.jit``
    a GPU kernel, so any decision taken here for "the interpreter" would then run on the GPU."""
    return os.environ.get("TRITON_INTERPRET", "").lower() in _TRUTHY


def detect_arch() -> Arch:
    """What this process actually runs on. The interpreter wins over a present GPU: it is what executes."""
    if interpreting():
        return Arch("interp", "interp")
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a hard dependency
        return Arch("cpu", "cpu")
    if torch.cuda.is_available():
        if getattr(torch.version, "hip", None):
            gcn = torch.cuda.get_device_properties(0).gcnArchName.split(":")[0]
            return Arch(gcn, "rocm")
        major, minor = torch.cuda.get_device_capability(0)
        # not parse_arch: a GPU newer than the table is still what runs, and must never stop a run
        return Arch(f"sm{major * 10 + minor}", "cuda", (major, minor))
    return Arch("cpu", "cpu")


#: The FP8 formats the arch model judges: those of :data:`harness.fp8.FORMATS` (which imports this module, so
#: the names are listed here; a test keeps the two equal).
_FP8_FORMATS = ("e4nv", "e5m2", "e4b15", "e4m3fnuz", "e5m2fnuz")


def _fp8_name(fmt: Any) -> str:
    """The harness's name of FP8 format ``fmt``, by the naming table :func:`harness.fp8.get_format` resolves with:
    an alias such as ``e4m3fn`` must be judged as the format it names."""
    name = getattr(fmt, "name", None)  # an FP8Format; a Triton dtype's name is its type name (fp8e4nv)
    key = name if isinstance(name, str) else fmt
    try:
        resolved = format_name(key, "fmt")
    except ValueError:
        resolved = None
    if resolved in _FP8_FORMATS:
        return resolved
    torch = sys.modules.get("torch")  # a torch dtype exists only once torch is imported
    if not isinstance(key, str) and not (torch is not None and isinstance(key, torch.dtype)):
        raise TypeError(f"fmt must be an FP8 format name, FP8Format or float8 dtype, got {type(fmt).__name__}")
    raise ValueError(f"fmt {fmt!r} is not an FP8 format; expected one of {', '.join(_FP8_FORMATS)} (or another "
                     f"name of one, such as e4m3fn or float8e5)")


def supports_format(arch: Arch | str, fmt: Any) -> tuple[bool, str]:
    """Whether Triton can produce FP8 format ``fmt`` (any name of it, an FP8Format or a float8 dtype) on ``arch``;
    the reason is a ready skip message."""
    a = _as_arch(arch, "arch")
    name = _fp8_name(fmt)
    if a.kind in ("interp",):
        if name in ("e4nv", "e5m2", "e4b15"):
            return True, ""
        return False, f"{name} is not emulated by the Triton interpreter"
    if a.kind == "cpu":
        return False, "no GPU and not interpreting (set TRITON_INTERPRET=1 or run on a GPU)"
    if a.kind == "cuda":
        if name == "e4nv" and (a.cc or 0) < 89:
            return False, f"e4nv needs sm89+ (running on {a.name})"
        if name == "e5m2" and (a.cc or 0) < 80 and triton_at_least(3, 7):
            # Measured with triton.compile: 3.9 lowers every cast to e5m2 with cvt.rn.f16x2.f32 and min.f16x2
            # (ptxas: "requires .target sm_80 or higher"); 3.6 still lowered it for sm75. 3.7/3.8 unmeasured,
            # assumed like 3.9; tests/harness/test_arch.py::test_supports_format_agrees_with_the_compiler checks it.
            return False, f"e5m2 needs sm80+ with triton {triton_version()} (running on {a.name})"
        if name in ("e4nv", "e5m2", "e4b15"):
            return True, ""
        return False, f"{name} is a ROCm format (running on {a.name})"
    # ROCm: MI300 (gfx94x) has the fnuz pair; OCP e4nv/e5m2 on gfx950+; no e4b15 lowering.
    if name in ("e4m3fnuz", "e5m2fnuz"):
        ok = a.family == "gfx942"
        return ok, "" if ok else f"{name} needs gfx94x (running on {a.name})"
    if name in ("e4nv", "e5m2"):
        # native OCP FP8 converts: CDNA4 (gfx950) and gfx12 (RDNA4 and later); elsewhere Triton emulates them
        # in software, with numerics nobody here has measured, so the model does not claim them
        ok = a.name == "gfx950" or re.fullmatch(r"gfx12[0-9][0-9a-f]", a.name) is not None
        return ok, "" if ok else f"{name} needs gfx950 or gfx12xx on ROCm (running on {a.name})"
    return False, f"{name} is not supported by Triton on ROCm (running on {a.name})"


def supports_bf16_arithmetic(arch: Arch | str) -> tuple[bool, str]:
    """Whether Triton's code for ``arch`` may use bf16 instructions (a bf16 value meeting an fp16 one, bf16
    ``max`` / ``*``); the reason is a ready skip message. Loads, stores and bf16 computed through fp32 compile
    everywhere. Derived from Triton 3.9's output for sm75 (``ptxas: Feature '.bf16' requires .target sm_80 or
    higher`` for ``tl.maximum(x, 0.0) * y`` with one operand fp16); Triton 3.6 still compiled that for sm75."""
    a = _as_arch(arch, "arch")
    if a.kind == "cuda" and (a.cc or 0) < 80:
        return False, f"bf16 arithmetic needs sm80+ (running on {a.name})"
    return True, ""


def supports_int8_dot(arch: Arch | str) -> tuple[bool, str]:
    """Whether Triton compiles a ``tl.dot`` of int8 operands for ``arch``; the reason is a ready skip message.
    Measured with ``triton.compile`` (Triton 3.6 and 3.9, 16x16x32 and 64x64x64 tiles, and test_core's ``test_dot``
    / ``test_dot3d`` int8 cases, 2026-12-06): sm75 fails in the TritonGPU passes ("PassManager::run failed": the FMA
    fallback applies ``arith.extf`` to the i8 operands), sm80 compiles it (MMA). Triton's own ``test_dot`` claims
    int8 from sm75; no CUDA CI of Triton runs sm75."""
    a = _as_arch(arch, "arch")
    if a.kind == "cuda" and (a.cc or 0) < 80:
        return False, f"int8 tl.dot needs sm80+ with triton {triton_version()} (running on {a.name})"
    return True, ""


def supports_scaled_dot_emulation(arch: Arch | str) -> tuple[bool, str]:
    """Whether Triton's emulation of ``tl.dot_scaled`` on ``arch`` stays within the arch's instructions; the reason
    is a ready skip message. Below sm89 it may not: Triton 3.9 compiled test_core's
    ``test_scaled_dot[32-128-64-False-False-False-e2m1-fp16-4-16-1]`` for sm75 into FP8 converts that ptxas refuses
    ("Feature 'cvt with .e4m3x2/.e5m2x2' requires .target sm_89 or higher", 2026-12-06), while other
    ``dot_scaled`` launches compile there; Triton's own ``test_scaled_dot`` skips CUDA below 8.9 ("float8e4nv not
    supported on CUDA < 8.9"). So only a failure that names those converts is this refusal."""
    a = _as_arch(arch, "arch")
    if a.kind == "cuda" and (a.cc or 0) < 89:
        return False, (f"tl.dot_scaled's emulation on {a.name} may use FP8 converts of sm89+ with triton "
                       f"{triton_version()} (Triton's own test_scaled_dot skips CUDA below 8.9)")
    return True, ""


def supports_scaled_dot(arch: Arch | str, scale: str) -> tuple[bool, str]:
    """Whether Triton compiles ``tl.dot_scaled`` with ``scale`` scales (``"e8m0"``: MX, ``"e4m3"``: NVFP4) on
    ``arch``, beyond what :func:`supports_format` says of the scale's FP8 type; the reason is a ready skip message.
    Launch capture's scale widening asks it (:func:`harness.compile.findings.expected_reason`).

    Triton 3.6 refuses NVFP4 wherever it emulates ``dot_scaled`` ("PassManager::run failed" in
    TritonGPUAccelerateMatmul): always on sm89 and sm90, which have no block-scaled MMA (``triton.compile`` for
    sm89 and sm90, 64x64 tiles and kernels/mx's 128-wide GEMM; sm90 also on the H200, 2026-12-04). On sm100 and
    sm120 it depends on the tile and formats, so they are not refused here: the 128-wide MX GEMM tiles compile on
    native block-scaled MMA (tcgen05 / mma.sync ... block_scale), 64x64 tiles on sm100 and e2m1 x e4m3 on sm120 are
    emulated and refused (``scripts/compile_dot_scaled_lowering.py``, 2026-12-04). 3.9 compiles NVFP4 on all of
    them; 3.7/3.8 are unmeasured, assumed like 3.6 (kernels/mx/gemm.py refuses the same range). Below sm89 the
    scale's e4m3 type itself is refused (:func:`supports_format`)."""
    a = _as_arch(arch, "arch")
    if scale == "e4m3" and a.kind == "cuda" and 89 <= (a.cc or 0) < 100 and not triton_at_least(3, 9):
        return False, (f"NVFP4 tl.dot_scaled (e4m3 scales) does not compile for {a.name} with triton "
                       f"{triton_version()} (Triton 3.6 refuses it where it emulates dot_scaled: sm89 and sm90)")
    return True, ""
