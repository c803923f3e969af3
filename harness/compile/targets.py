"""GPU compile targets: names (``sm90``, ``gfx942``) to Triton's ``GPUTarget``, and which of them the installed
Triton can compile for.

Why a module of its own: the pytest options, the ``compile_targets`` marker, launch capture and the compile
CLI all validate targets before anything compiles, and an unknown target must never reach LLVM or ptxas
(LLVM may abort the whole process). Nothing here imports triton until a target is checked.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness.arch import parse_arch
from harness.versions import triton_version

__all__ = [
    "DEFAULT_TARGETS",
    "Target",
    "parse_target",
    "parse_targets",
    "target_available",
    "target_supported",
    "check_targets",
    "frontend_class",
]

#: CUDA targets compiled by default: Turing through Blackwell consumer, one per FP8-relevant step.
DEFAULT_TARGETS: tuple[str, ...] = ("sm75", "sm80", "sm86", "sm89", "sm90", "sm100", "sm120")


@dataclass(frozen=True)
class Target:
    """A target: ``sm90`` → ``GPUTarget("cuda", 90, 32)``, ``gfx942`` → ``GPUTarget("hip", "gfx942", 64)``."""

    name: str
    backend: str
    arch: int | str
    warp_size: int

    @property
    def cc(self) -> int | None:
        """CUDA capability as one number (90), ``None`` for ROCm."""
        return self.arch if self.backend == "cuda" else None  # type: ignore[return-value]

    def gpu_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget(self.backend, self.arch, self.warp_size)

    def __str__(self) -> str:
        return self.name


def parse_target(spec: str | Target | Any) -> Target:
    """``"sm90"``, ``"sm_90"``, ``"90"``, ``"gfx942"``, an :class:`~harness.arch.Arch` or a Target."""
    if isinstance(spec, Target):
        return spec
    name = getattr(spec, "name", None) if not isinstance(spec, str) else spec
    if not isinstance(name, str):
        raise TypeError(f"target must be a str such as 'sm90' or 'gfx942', got {type(spec).__name__}")
    try:
        arch = parse_arch(name, known=False)
    except ValueError:
        raise ValueError(
            f"target {spec!r} is not understood; expected 'smXY' (e.g. 'sm90', 'sm_89', '120') or 'gfxNNN' "
            f"(e.g. 'gfx942')"
        ) from None
    if arch.kind == "cuda":
        return Target(arch.name, "cuda", arch.cc, 32)  # type: ignore[arg-type]
    if arch.kind == "rocm":
        return Target(arch.name, "hip", arch.name, 64)
    raise ValueError(f"target {spec!r}: {arch.name!r} is not a GPU target; expected 'smXY' or 'gfxNNN'")


def parse_targets(specs: str | Iterable[Any]) -> tuple[Target, ...]:
    """A comma-separated string or an iterable of target specs, duplicates dropped, order kept."""
    if isinstance(specs, str):
        specs = [s for s in (p.strip() for p in specs.split(",")) if s]
    out: dict[str, Target] = {}
    for s in specs:
        t = parse_target(s)
        out.setdefault(t.name, t)
    if not out:
        raise ValueError("targets: need at least one target, e.g. 'sm80,sm90'")
    return tuple(out.values())


@functools.cache
def target_available(target: Target) -> tuple[bool, str]:
    """Whether this Triton install has the backend for ``target``; the reason is a ready skip message."""
    from triton.backends import backends

    wanted = "nvidia" if target.backend == "cuda" else "amd"
    if wanted not in backends:
        return False, f"triton {triton_version()} has no {wanted} backend here (needed for {target.name})"
    return True, ""


def _ptxas_archs(path: str) -> frozenset[str] | None:
    """The ``--gpu-name`` values ptxas at ``path`` accepts (``sm_90a``...), read from its ``--help``; ``None``
    when it cannot be run (then nothing is refused up front)."""
    try:
        out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"--gpu-name\b(.*?)(?:\n\s*--[a-z])", out, re.S)
    names = re.findall(r"'(sm_\d+[a-z]?)'", m.group(1) if m else "")
    return frozenset(names) or None


def _cuda_supported(cc: int) -> tuple[bool, str]:
    try:
        from triton.backends.nvidia import compiler as nv

        tool = nv.get_ptxas(cc)
        name = nv.sm_arch_from_capability(cc)
        path = tool.path
    except Exception:  # pragma: no cover - a Triton whose NVIDIA backend looks different: do not guess
        return True, ""
    archs = _ptxas_archs(path)
    if archs is None or name in archs:
        return True, ""
    known = sorted({int(a[3:].rstrip("abcdef")) for a in archs})
    return False, (
        f"triton {triton_version()} cannot compile for sm{cc}: the ptxas it uses for that target "
        f"({path.rsplit('/', 1)[-1]}) does not accept {name}; it accepts sm{', sm'.join(map(str, known))}"
    )


def _hip_supported(arch: str) -> tuple[bool, str]:
    from triton._C.libtriton import amd

    bad = f"triton {triton_version()}'s LLVM does not know the AMD GPU {arch!r}"
    if hasattr(amd, "get_target_triple"):  # Triton 3.7+: LLVM's own parser, raises on an unknown processor
        try:
            amd.get_target_triple(arch)
        except Exception as e:
            return False, f"{bad} ({e})"
        return True, ""
    return _hip_supported_via_llvm(arch, bad)


def _hip_supported_via_llvm(arch: str, bad: str) -> tuple[bool, str]:
    """Older Triton: ask LLVM's AMDGPU target about the processor and read its complaint from stderr."""
    try:
        from triton._C.libtriton import amd, llvm

        llvm.init_targets()
        probe = amd.has_architected_sgprs
    except Exception:  # pragma: no cover
        return True, ""
    with tempfile.TemporaryFile() as err:
        saved = os.dup(2)
        try:
            os.dup2(err.fileno(), 2)
            probe(arch)
        except Exception:
            pass
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        text = err.read().decode(errors="replace")
    if "not a recognized processor" in text:
        return False, bad
    return True, ""


@functools.cache
def target_supported(target: Target) -> tuple[bool, str]:
    """Whether the installed Triton can compile for ``target`` at all (its backend is here and knows the
    processor). Why: an unknown target (``sm91``, ``gfx000``) otherwise reaches LLVM or ptxas, and LLVM may
    abort the whole Python process. Derived from the installed Triton: the ``--gpu-name`` list of the ptxas
    its NVIDIA backend picks for the capability, or the AMD backend's LLVM."""
    ok, reason = target_available(target)
    if not ok:
        return ok, reason
    if target.backend == "cuda":
        return _cuda_supported(int(target.arch))
    return _hip_supported(str(target.arch))


def check_targets(targets: Iterable[Target]) -> None:
    """``ValueError`` naming every target the installed Triton cannot compile for (before any compile)."""
    bad = [reason for t in targets for ok, reason in [target_supported(t)] if not ok and _backend_here(t)]
    if bad:
        raise ValueError("targets: " + "; ".join(bad))


def _backend_here(t: Target) -> bool:
    return target_available(t)[0]


@functools.cache
def frontend_class(target: Target) -> str:
    """The targets whose Triton frontend (``ASTSource.make_ir`` and the TTIR passes) gives the same outcome share
    this name: what the installed Triton's backend hands its frontend for the target. Derived from Triton's
    ``backends/nvidia/compiler.py`` (3.6 and 3.9): the frontend sees the target only through
    ``get_codegen_implementation`` (``convert_custom_types``: the sm70 or the sm80 FP8 helper) and the options
    its ``language/`` reads to accept or refuse an op (``supported_fp8_dtypes``: e4nv from sm89;
    ``deprecated_fp8_dot_operand_dtypes``: e4b15 from sm90; the dot input precisions).
    ``max_num_imprecise_acc_default`` is left out: the frontend writes it into a ``tt.dot`` attribute and never
    refuses over it. On Triton 3.9 this gives four classes of the default targets: sm75 | sm80, sm86 | sm89 |
    sm90, sm100, sm120. A target whose backend cannot be asked (ROCm, a Triton that looks different) is a class
    of its own."""
    if target.backend != "cuda":
        return target.name
    try:
        from triton.compiler.compiler import make_backend

        backend = make_backend(target.gpu_target())
        opts = backend.parse_options({"enable_fp_fusion": True})  # given: no unset-default warning
        conv = backend.get_codegen_implementation(opts).get("convert_custom_types")
        parts = (getattr(conv, "__qualname__", repr(conv)), tuple(sorted(opts.supported_fp8_dtypes)),
                 tuple(sorted(getattr(opts, "deprecated_fp8_dot_operand_dtypes", ()) or ())),
                 tuple(getattr(opts, "allowed_dot_input_precisions", ()) or ()),
                 str(getattr(opts, "default_dot_input_precision", "")))
    except Exception:  # pragma: no cover - a Triton whose backend looks different: no sharing
        return target.name
    return "cuda:" + ";".join(str(p) for p in parts)
