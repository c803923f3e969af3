"""Another Triton's compiled code of the pattern kernels (:mod:`tests.lowering.kernels`), recorded on a machine
with no GPU and launched on a GPU whose image has a different Triton.

Why: the GPU image has Triton 3.6 and cannot install 3.9, yet the 3.9 lane needs goldens of 3.9's lowering (the
reduction order and contraction differ between versions). Triton 3.9 compiles each launch here exactly as its
JIT would (:func:`harness.lowering.compiled.specialize`: signature, constexprs, divisible-by-16 arguments,
``num_warps``, fp fusion), and the GPU runs that cubin through cupy with the launch's own tensors. Both sides
check that the launch is the recorded one, and every launch's packed parameters are checked against the PTX
entry's ``.param`` list before anything runs: a mismatch is refused, never turned into a golden.

- :class:`Recorder` (CPU, ``scripts/compile_lowering_kernels.py``): per launch, compiles for sm90 and writes the
  cubin, the PTX and a manifest entry, after checking that Triton's own JIT builds the same machine code for the
  launch (:func:`jit_compiled`, :func:`same_code`; the manifest's ``jit_check`` says which held).
- :class:`Launcher` (GPU, ``scripts/capture_lowering_goldens.py --compiled DIR``): looks each launch up in the
  manifest and runs the recorded code.
- :func:`hook`: puts either in place of the kernels' ``run`` through a :class:`harness.interp.patch.Patch`.

The launch ABI (both Triton 3.6 and 3.9, ``backends/nvidia/driver.py``): the non-constexpr arguments in order,
then two pointers, global scratch and profile scratch (``NULL`` when the kernel's metadata asks for no bytes);
one CTA of ``32 * num_warps`` threads per program, ``metadata.shared`` bytes of dynamic shared memory.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["FORMAT", "Launcher", "Recorder", "hook", "jit_compiled", "pack", "param_plan", "ptx_header",
           "ptx_params", "same_code"]

#: Bumped when the manifest's layout changes.
FORMAT = "lowering-aot-1"
#: the pointers Triton's launcher appends after the kernel's own parameters (driver.py, Triton 3.6 and 3.9)
SCRATCH = ("global_scratch", "profile_scratch")
#: a runtime argument's Triton type -> the PTX ``.param`` type LLVM gives it and the numpy type it is packed as
#: (derived from Triton 3.9's and 3.6's PTX for sm90: ``.u64 .ptr .global`` pointers, ``.u32`` i32, ``.f32``)
SCALARS: dict[str, tuple[str, type]] = {"i32": (".u32", np.int32), "u32": (".u32", np.uint32),
                                        "i64": (".u64", np.int64), "u64": (".u64", np.uint64),
                                        "fp32": (".f32", np.float32), "fp64": (".f64", np.float64)}
_OPTIONS = ("num_warps", "num_stages", "enable_fp_fusion")
_UNSUPPORTED_OPTIONS = ("num_ctas", "maxnreg", "launch_cooperative_grid", "launch_pdl", "debug")


class LaunchMismatch(RuntimeError):
    """A launch that is not the recorded one, or parameters that do not fit the compiled entry."""


def ptx_header(ptx: str) -> dict[str, str]:
    """``.version`` and ``.target`` of a PTX text."""
    v = re.search(r"^\s*\.version\s+(\d+\.\d+)", ptx, re.M)
    t = re.search(r"^\s*\.target\s+([\w,\s]+?)\s*$", ptx, re.M)
    return {"version": v.group(1) if v else "", "target": t.group(1) if t else ""}


def ptx_params(ptx: str, name: str) -> list[tuple[str, bool]]:
    """The ``.param`` list of the ``.entry name``: per parameter its type (``.u64``, ``.f32``...) and whether it
    is declared a pointer (``.ptr``). ``ValueError`` when the PTX has no such entry."""
    m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\((.*?)\)", ptx, re.S)
    if m is None:
        raise ValueError(f"the PTX has no .entry {name!r}")
    out = []
    for decl in m.group(1).split(","):
        toks = decl.split()
        if not toks:
            continue
        if toks[0] != ".param" or len(toks) < 3:
            raise ValueError(f".entry {name}: cannot read the parameter declaration {decl.strip()!r}")
        out.append((toks[1], ".ptr" in toks))
    return out


def param_plan(name: str, signature: dict[str, str], ptx: list[tuple[str, bool]]) -> list[dict[str, str]]:
    """The parameters a launch of ``name`` passes, in order: its runtime arguments (``signature``: name -> Triton
    type, constexprs excluded), then :data:`SCRATCH`; each with the PTX type it must have. ``LaunchMismatch``
    when the compiled entry's ``.param`` list (``ptx``, :func:`ptx_params`) does not have that count and those
    types: a launch packed otherwise would read its scalars from the wrong bytes."""
    plan = []
    for arg, ty in signature.items():
        if ty.startswith("*"):
            plan.append({"name": arg, "type": ty, "ptx": ".u64", "pointer": True})
        elif ty in SCALARS:
            plan.append({"name": arg, "type": ty, "ptx": SCALARS[ty][0], "pointer": False})
        else:
            raise LaunchMismatch(f"{name}: argument {arg!r} has Triton type {ty!r}; this launcher packs pointers "
                                 f"and {sorted(SCALARS)} only")
    plan += [{"name": s, "type": "*i8", "ptx": ".u64", "pointer": True} for s in SCRATCH]
    if len(plan) != len(ptx):
        raise LaunchMismatch(f"{name}: the PTX entry takes {len(ptx)} parameters {[t for t, _ in ptx]}, the launch "
                             f"would pass {len(plan)} ({[p['name'] for p in plan]})")
    for i, (p, (ty, is_ptr)) in enumerate(zip(plan, ptx, strict=True)):
        if ty != p["ptx"] or (is_ptr and not p["pointer"]):
            raise LaunchMismatch(f"{name}: parameter {i} ({p['name']}, Triton {p['type']}) is packed as {p['ptx']}"
                                 f"{' pointer' if p['pointer'] else ''}; the PTX declares {ty}"
                                 f"{' .ptr' if is_ptr else ''}")
    return plan


def pack(name: str, plan: list[dict[str, str]], arguments: dict[str, Any], recorded: dict[str, Any],
         scratch: tuple[int, int] = (0, 0)) -> tuple[Any, ...]:
    """The launch's parameter values as numpy scalars, in ``plan`` order: a tensor's ``data_ptr()`` as
    ``uint64``, a scalar as its PTX type, the scratch pointers ``scratch``. ``arguments``: the launch's bound
    arguments; ``recorded``: the scalars' values when it was compiled (a different value is another launch).
    ``LaunchMismatch`` for a missing argument, a tensor where a scalar was compiled or back, a value that
    differs from the recorded one or does not fit its type."""
    out: list[Any] = []
    for p in plan:
        arg = p["name"]
        if arg in SCRATCH:
            out.append(np.uint64(scratch[SCRATCH.index(arg)]))
            continue
        if arg not in arguments:
            raise LaunchMismatch(f"{name}: the launch passes no argument {arg!r}")
        v = arguments[arg]
        if p["pointer"]:
            if not hasattr(v, "data_ptr"):
                raise LaunchMismatch(f"{name}: argument {arg!r} was compiled as a pointer ({p['type']}), the launch "
                                     f"passes a {type(v).__name__}")
            out.append(np.uint64(v.data_ptr()))
            continue
        if hasattr(v, "data_ptr") or isinstance(v, bool) or not isinstance(v, (int, float)):
            raise LaunchMismatch(f"{name}: argument {arg!r} was compiled as a {p['type']} scalar, the launch passes "
                                 f"{type(v).__name__}")
        if arg not in recorded or recorded[arg] != v:
            raise LaunchMismatch(f"{name}: argument {arg!r} is {v!r}; it was compiled with {recorded.get(arg)!r}")
        np_type = SCALARS[p["type"]][1]
        if np.issubdtype(np_type, np.integer):
            info = np.iinfo(np_type)
            if not isinstance(v, int) or not info.min <= v <= info.max:
                raise LaunchMismatch(f"{name}: argument {arg!r} = {v!r} does not fit {p['type']}")
        out.append(np_type(v))
    return tuple(out)


def _bind(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The launch's arguments by parameter name, defaults applied (the launch options left out)."""
    from harness.interp.jit import as_jit

    jit = as_jit(fn)
    call = {k: v for k, v in kwargs.items() if k in jit.arg_names or k not in _OPTIONS + _UNSUPPORTED_OPTIONS}
    bound = inspect.signature(jit.fn).bind(*args, **call)
    bound.apply_defaults()
    return dict(bound.arguments)


def _grid(grid: Any, arguments: dict[str, Any]) -> list[int]:
    """The launch grid as three ints, as Triton's JIT evaluates it (a callable gets the bound arguments)."""
    g = grid(arguments) if callable(grid) else grid
    g = tuple(g) if isinstance(g, (tuple, list)) else (g,)
    if not 1 <= len(g) <= 3 or not all(isinstance(x, int) and x >= 0 for x in g):
        raise LaunchMismatch(f"the grid {g!r} is not 1 to 3 non-negative ints")
    return [int(x) for x in g] + [1] * (3 - len(g))


def _qualname(fn: Any) -> str:
    from harness.interp.jit import as_jit

    py = as_jit(fn).fn
    return f"{py.__module__}.{py.__qualname__}"


def _spec_json(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The launch's specialization (:func:`harness.lowering.compiled.specialize`) as JSON values."""
    from harness.lowering.compiled import specialize

    for k in _UNSUPPORTED_OPTIONS:
        if kwargs.get(k) not in ((None, False, 1) if k == "num_ctas" else (None, False)):
            raise LaunchMismatch(f"{_qualname(fn)}: launch option {k}={kwargs[k]!r} is not recorded by this tool")
    s = specialize(fn, args, kwargs)
    # the signature as pairs: its order is the parameters' order, which a JSON object need not keep
    return {"signature": [[k, v] for k, v in s.signature.items()],
            "constexprs": {k: repr(v) for k, v in sorted(s.constexprs.items())},
            "divisible": sorted(s.divisible), "num_warps": s.num_warps, "fp_fusion": s.fp_fusion,
            "num_stages": kwargs.get("num_stages")}


def _spec_diff(want: dict[str, Any], got: dict[str, Any]) -> list[str]:
    return [f"{k}: recorded {want.get(k)!r}, this launch {got.get(k)!r}" for k in sorted(set(want) | set(got))
            if want.get(k) != got.get(k)]


class _TargetDriver:
    """What Triton's JIT asks the active driver for when it binds and compiles a launch (``JITFunction.run`` and
    ``create_binder``, Triton 3.6 and 3.9): the current target, device and stream. Answers with a fixed target, so
    a machine with no GPU compiles for it."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def get_current_target(self) -> Any:
        return self.target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0


def jit_compiled(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], arch: str = "sm90") -> Any:
    """The ``CompiledKernel`` Triton's own JIT builds for the launch ``fn[grid](*args, **kwargs)`` on a GPU of
    ``arch``: its ``run`` with ``warmup=True`` (binder, specialization, ``parse_options`` of the launch's keywords,
    ``compile``), with the active driver answering ``arch``'s target and a fresh per-device cache, both put back
    after. An ``InterpretedFunction`` is compiled as the ``JITFunction`` it would be without ``TRITON_INTERPRET``.
    Nothing runs. Why: the recorder compiles through the harness's own path; this is the JIT's, so the two can be
    checked to build the same code on the machine that records, for the Triton that compiles."""
    from collections import defaultdict

    from triton.runtime.driver import driver

    from harness.compile.targets import parse_target
    from harness.interp.jit import as_jit
    from harness.interp.patch import Patch, lift

    jit = as_jit(fn)
    with lift("lowering-aot"), Patch.context() as patch:
        patch.setattr(driver, "_active", _TargetDriver(parse_target(arch).gpu_target()), tag="lowering-aot-jit")
        patch.setattr(jit, "device_caches", defaultdict(jit.create_binder), tag="lowering-aot-jit")
        return type(jit).run(jit, *args, grid=(1,), warmup=True, **kwargs)


def same_code(a: bytes, b: bytes) -> str | None:
    """Whether two cubins hold the same machine code: the bytes, else the SASS ``cuobjdump`` gives of each
    (Triton's ``tools.disasm.get_sass``). Why not the bytes alone: the cubin carries line info with the source
    file's path, and Triton's cache may answer with a kernel compiled from another checkout's copy of the file.
    Says which held, ``None`` when neither."""
    if a == b:
        return "cubin identical to Triton's JIT"
    from triton.tools.disasm import get_sass

    if get_sass(a) == get_sass(b):
        return "SASS identical to Triton's JIT (the cubins differ outside the code)"
    return None


class Recorder:
    """Compiles each launch it is handed for ``arch`` with the installed Triton and keeps the manifest
    (:meth:`write`). One compiled kernel (cubin + PTX) per distinct specialization."""

    def __init__(self, out: Path, arch: str = "sm90") -> None:
        import triton
        from triton.backends.nvidia.compiler import get_ptxas, get_ptxas_version

        self.out = Path(out)
        self.arch = arch
        cc = int(arch[2:])
        text = get_ptxas_version(cc)
        m = re.search(r"release ([\d.]+), V([\d.]+)", text)
        self.manifest: dict[str, Any] = {
            "format": FORMAT, "triton": triton.__version__, "arch": arch,
            "ptxas": m.group(2) if m else text.strip().splitlines()[-1],
            "ptxas_tool": Path(get_ptxas(cc).path).name, "kernels": {}, "launches": {},
            "TRITON_DEFAULT_FP_FUSION": os.environ.get("TRITON_DEFAULT_FP_FUSION", "")}
        self._case: list[dict[str, Any]] | None = None

    def begin(self, pattern: str, case: str) -> None:
        """The launches that follow are the case's, in order."""
        self._case = self.manifest["launches"].setdefault(pattern, {}).setdefault(case, [])
        self._case.clear()

    def __call__(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any) -> None:
        if self._case is None:
            raise LaunchMismatch("Recorder: a launch outside begin(pattern, case)")
        self._case.append(self.record(fn, args, kwargs, grid))

    def record(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any) -> dict[str, Any]:
        """Compile one launch (unless an identical specialization was) and its manifest entry."""
        from harness.compile.matrix import compile_matrix
        from harness.lowering.compiled import specialize

        spec = _spec_json(fn, args, kwargs)
        arguments = _bind(fn, args, kwargs)
        s = specialize(fn, args, kwargs)
        options: dict[str, Any] = {"num_warps": s.num_warps}
        if s.fp_fusion is not None:
            options["enable_fp_fusion"] = s.fp_fusion
        if kwargs.get("num_stages") is not None:
            options["num_stages"] = int(kwargs["num_stages"])
        qual = _qualname(fn)
        key = hashlib.sha256(json.dumps([qual, spec], sort_keys=True).encode()).hexdigest()[:16]
        if key not in self.manifest["kernels"]:
            res = compile_matrix(fn, signature=s.signature, constexprs=s.constexprs, targets=[self.arch],
                                 options=options, divisible=s.divisible)[self.arch]
            if isinstance(res, BaseException):
                raise LaunchMismatch(f"{qual}: does not compile for {self.arch}: {type(res).__name__}: {res}")
            meta = res.kernel.metadata
            ptx, cubin = str(res.asm["ptx"]), bytes(res.asm["cubin"])
            plan = param_plan(meta.name, s.signature, ptx_params(ptx, meta.name))
            jit = jit_compiled(fn, args, kwargs, self.arch)
            same = same_code(cubin, bytes(jit.asm["cubin"]))
            launch = ("num_warps", "num_ctas", "shared", "global_scratch_size", "profile_scratch_size")
            if same is None or any(getattr(meta, k, None) != getattr(jit.metadata, k, None) for k in launch):
                raise LaunchMismatch(f"{qual}: Triton's own JIT compiles this launch to other code than the "
                                     f"recorder's compile (JIT: num_warps={jit.metadata.num_warps}, num_stages="
                                     f"{jit.metadata.num_stages}; recorder options {options}); nothing recorded")
            stem = f"{meta.name}-{key}"
            self.out.mkdir(parents=True, exist_ok=True)
            (self.out / f"{stem}.cubin").write_bytes(cubin)
            (self.out / f"{stem}.ptx").write_text(ptx)
            self.manifest["kernels"][key] = {
                "kernel": qual, "name": meta.name, "cubin": f"{stem}.cubin", "ptx": f"{stem}.ptx",
                "cubin_sha256": hashlib.sha256(cubin).hexdigest(), **ptx_header(ptx), "params": plan,
                "num_warps": meta.num_warps, "num_ctas": getattr(meta, "num_ctas", 1), "shared": meta.shared,
                "enable_fp_fusion": bool(getattr(meta, "enable_fp_fusion", True)), "options": options,
                **{k: int(getattr(meta, k, 0) or 0) for k in ("global_scratch_size", "global_scratch_align",
                                                              "profile_scratch_size", "profile_scratch_align")},
                "launch_cooperative_grid": bool(getattr(meta, "launch_cooperative_grid", False)),
                "launch_pdl": bool(getattr(meta, "launch_pdl", False)), "specialization": spec,
                "jit_check": same}
        scalars = {k: arguments[k] for k, ty in s.signature.items() if not ty.startswith("*")}
        return {"kernel": qual, "key": key, "grid": _grid(grid, arguments), "scalars": scalars}

    def write(self) -> Path:
        path = self.out / "manifest.json"
        self.out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.manifest, indent=1, sort_keys=True))
        return path


class Launcher:
    """Runs each launch it is handed with the recorded compiled kernel (:meth:`resolve` checks it is the recorded
    launch; :meth:`__call__` runs it with cupy). ``loaded``: per kernel key, which code ran (the cubin, or the PTX
    JIT-compiled by the driver when the cubin did not load)."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        self.manifest = json.loads((self.dir / "manifest.json").read_text())
        if self.manifest.get("format") != FORMAT:
            raise LaunchMismatch(f"{self.dir}/manifest.json has format {self.manifest.get('format')!r}, this "
                                 f"launcher reads {FORMAT!r}: compile again with scripts/compile_lowering_kernels.py")
        self.loaded: dict[str, str] = {}
        self.jit_check: dict[str, str] = {}
        self._functions: dict[str, Any] = {}
        self._case: list[dict[str, Any]] = []
        self._where = ""

    def begin(self, pattern: str, case: str) -> None:
        cases = self.manifest["launches"].get(pattern, {})
        if case not in cases:
            raise LaunchMismatch(f"{pattern}/{case}: not in {self.dir}/manifest.json (compiled patterns: "
                                 f"{sorted(self.manifest['launches'])}); compile it first")
        self._case = list(cases[case])
        self._where = f"{pattern}/{case}"

    def end(self) -> None:
        if self._case:
            raise LaunchMismatch(f"{self._where}: {len(self._case)} recorded launches were not made "
                                 f"({[e['kernel'] for e in self._case]})")

    def resolve(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any
                ) -> tuple[dict[str, Any], list[int], tuple[Any, ...]]:
        """The next recorded launch if this is it: ``(kernel entry, grid, parameters without the scratch)``.
        ``LaunchMismatch`` naming what differs (kernel, grid, specialization, a scalar's value)."""
        if not self._case:
            raise LaunchMismatch(f"{self._where or 'no case begun'}: a launch of {_qualname(fn)} that was not "
                                 f"recorded")
        want = self._case.pop(0)
        qual = _qualname(fn)
        where = f"{self._where} launch of {qual}"
        if want["kernel"] != qual:
            raise LaunchMismatch(f"{where}: the recorded launch here is {want['kernel']}")
        entry = self.manifest["kernels"][want["key"]]
        arguments = _bind(fn, args, kwargs)
        g = _grid(grid, arguments)
        if g != want["grid"]:
            raise LaunchMismatch(f"{where}: grid {g}, recorded {want['grid']}")
        diff = _spec_diff(entry["specialization"], _spec_json(fn, args, kwargs))
        if diff:
            raise LaunchMismatch(f"{where}: specialized otherwise than the compiled kernel (the pointers' alignment "
                                 f"or an integer's value changed it): " + "; ".join(diff))
        ptx = ptx_params((self.dir / entry["ptx"]).read_text(), entry["name"])
        plan = param_plan(entry["name"], dict(entry["specialization"]["signature"]), ptx)
        if plan != entry["params"]:
            raise LaunchMismatch(f"{where}: the parameter plan differs from the one recorded")
        params = pack(entry["name"], plan[: -len(SCRATCH)], arguments, want["scalars"])
        return entry, g, params

    def _function(self, key: str, entry: dict[str, Any]) -> Any:
        import cupy as cp

        if key in self._functions:
            return self._functions[key]
        digest = hashlib.sha256((self.dir / entry["cubin"]).read_bytes()).hexdigest()
        if digest != entry["cubin_sha256"]:
            raise LaunchMismatch(f"{self.dir / entry['cubin']}: not the cubin the manifest recorded (sha256)")
        try:
            fn = cp.RawModule(path=str(self.dir / entry["cubin"])).get_function(entry["name"])
            self.loaded[key] = "cubin"
        except Exception as e:  # the driver may refuse a newer ptxas's cubin: its own JIT of the PTX then
            refused = f"{type(e).__name__}: {str(e)[:200]}"
            text = re.sub(r"^(\s*\.version\s+)\d+\.\d+", r"\g<1>8.8", (self.dir / entry["ptx"]).read_text(),
                          count=1, flags=re.M)
            path = Path(tempfile.mkdtemp(prefix="lowering-aot-")) / f"{Path(entry['ptx']).stem}.v88.ptx"
            path.write_text(text)
            try:
                fn = cp.RawModule(path=str(path)).get_function(entry["name"])
            except Exception as e2:
                raise LaunchMismatch(f"{entry['name']}: neither the cubin ({refused}) nor the PTX at .version 8.8 "
                                     f"({type(e2).__name__}: {str(e2)[:200]}) loads") from e2
            self.loaded[key] = f"ptx .version 8.8, driver JIT (cubin refused: {refused})"
        self._functions[key] = fn
        return fn

    def __call__(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any) -> None:
        import cupy as cp
        import torch

        key = self._case[0]["key"] if self._case else ""
        self._cross_check(fn, args, kwargs)
        entry, g, params = self.resolve(fn, args, kwargs, grid)
        arguments = _bind(fn, args, kwargs)
        for p in entry["params"]:
            v = arguments.get(p["name"])
            if p["pointer"] and p["name"] not in SCRATCH and getattr(getattr(v, "device", None), "type", "") != "cuda":
                raise LaunchMismatch(f"{self._where}: {entry['name']} argument {p['name']!r} is not a CUDA tensor")
        if entry["num_ctas"] != 1 or entry["launch_cooperative_grid"] or entry["launch_pdl"]:
            raise LaunchMismatch(f"{entry['name']}: num_ctas / cooperative / PDL launches are not supported here")
        scratch, keep = [], []
        for kind in ("global_scratch", "profile_scratch"):
            size, align = entry[f"{kind}_size"], entry[f"{kind}_align"]
            if not size:
                scratch.append(0)
                continue
            if align > 256:
                raise LaunchMismatch(f"{entry['name']}: {kind} needs {align}-byte alignment (torch gives 256)")
            buf = torch.zeros(size * g[0] * g[1] * g[2], dtype=torch.uint8, device="cuda")
            keep.append(buf)
            scratch.append(buf.data_ptr())
        f = self._function(key, entry)
        if entry["shared"] > 48 * 1024:
            attr = getattr(cp.cuda.driver, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 8)
            cp.cuda.driver.funcSetAttribute(f.ptr, attr, entry["shared"])
        f(tuple(g), (32 * entry["num_warps"], 1, 1), (*params, np.uint64(scratch[0]), np.uint64(scratch[1])),
          shared_mem=entry["shared"])
        torch.cuda.synchronize()
        del keep

    def _cross_check(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """The running Triton's own JIT specialization of this launch (its binder and ``_pack_args``, private API
        of Triton 3.6) against the recorded one: refused when they differ; noted in :attr:`jit_check` when the
        API is not there to ask."""
        if not self._case:
            return
        entry = self.manifest["kernels"][self._case[0]["key"]]
        try:
            from triton import knobs
            from triton.runtime import driver

            kw = dict(kwargs, debug=bool(kwargs.get("debug", fn.debug) or knobs.runtime.debug),
                      instrumentation_mode=knobs.compilation.instrumentation_mode)
            device = driver.active.get_current_device()
            _, _, _, backend, binder = fn.device_caches[device]
            bound, specialization, options = binder(*args, **kw)
            _, signature, constexprs, attrs = fn._pack_args(backend, kw, bound, specialization, options)
            names = list(fn.arg_names)
            got = {"signature": [[k, v] for k, v in signature.items() if v != "constexpr"],
                   "divisible": sorted(names[p[0]] for p, a in attrs.items() if ["tt.divisibility", 16] in
                                       [list(x) for x in a]),
                   "constexprs": sorted(names[p[0]] for p in constexprs)}
        except Exception as e:  # a Triton without this private API: the harness's specialize was still checked
            self.jit_check.setdefault("unavailable", f"{type(e).__name__}: {str(e)[:200]}")
            return
        spec = entry["specialization"]
        want = {"signature": [list(kv) for kv in spec["signature"]], "divisible": spec["divisible"],
                "constexprs": sorted(spec["constexprs"])}
        diff = _spec_diff(want, got)
        if diff:
            raise LaunchMismatch(f"{self._where}: this Triton's JIT specializes {entry['kernel']} otherwise than the "
                                 f"recorded compile: " + "; ".join(diff))
        self.jit_check[entry["kernel"]] = "matches"


def hook(patch: Any, cls: type, on_launch: Callable[[Any, tuple[Any, ...], dict[str, Any], Any], None]) -> None:
    """Replace ``cls.run`` (``JITFunction`` or ``InterpretedFunction``) through ``patch`` by a call of
    ``on_launch(fn, args, kwargs, grid)``: the launch is recorded or run by it, never by Triton."""

    def run(self: Any, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> None:
        if warmup:
            raise LaunchMismatch(f"{_qualname(self)}: a warmup launch is not recorded by this tool")
        on_launch(self, args, kwargs, grid)

    patch.setattr(cls, "run", run, tag="lowering-aot")
