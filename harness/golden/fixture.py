"""The ``golden`` fixture object: one test item's checks, each carried out as :func:`decide` says.

Why apart from the glue (``harness.golden.plugin``): this is the half that imports torch, compares tensors and
writes files, loaded on first use of the fixture. It runs one workflow, pytest-regressions style: read the
file (``harness.golden.files``), ask the pure table (``harness.golden.decide``) what to do, compare or
write, and hand anything that did not pass as one :class:`GoldenFailure` record to the one function that
words it (``harness.golden.message``); :meth:`Golden.check` raises it, once.

* no golden file: fail with the exact command that creates it; nothing is written;
* a golden file: compare; on mismatch fail with the report table and leave the file untouched;
* ``--golden-regen``: a failing check rewrites its file, and the test still fails ("regenerated");
* ``--golden-regen-all``: every check re-captures its file (written only when the content changed) and
  passes; what changed is listed in the terminal summary and in ``--golden-changes=PATH``;
* a golden captured on another arch (also a damaged one whose metadata still names that arch) is compared,
  never rewritten, in every mode; the failure prints ``rm <file> && python -m harness golden regen <test>``
  to replace it on purpose (a regen run creates a missing golden);
* a path that is not a regular file inside the golden dir fails every mode naming it, and is never opened,
  followed or replaced.

Default tolerance (``tol=None``): on the arch that generated the golden, bit-exact (FP8: zero ULP and the
same codes); on another arch the tolerance table, op ``golden/<harness_op>`` when the table has a row for
exactly that op, else the kernel's own op ``<harness_op>`` (which falls back to ``*``); ``harness_op`` is
:data:`harness.tolerances.DEFAULT_OP` without a ``@pytest.mark.harness_op``. The dtype key is the test's
``dtype_case`` id when it has one, else the FP8 format (``e4nv``) or the float dtype (``bf16``). Integer and
bool tensors always compare exactly. An explicit ``tol=`` wins. FP8 goldens compare codes. NaN (a NaN code,
a NaN float) fails the check, as in every harness assert, unless ``check(..., equal_nan=True)``: then it must
face NaN at the same index (any NaN code of the format); on the golden's own arch the bits must still match. So a
golden of FP8 codes holding NaN is written only with ``equal_nan=True`` (it could never pass otherwise); a float
golden never holds NaN (:func:`~harness.golden.files.encode_golden` refuses it).

``--golden-regen-all`` rewrites a file only when its content changed: the tensor's bits, dtype, shape or
FP8 format, or the op / dtype case. A new torch/triton version alone does not rewrite it (no churn).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

import harness
from harness import summary
from harness.compare.checks import check_close, check_flag, check_fp8
from harness.fp8 import decode, is_nan_code, ulp_distance
from harness.golden.decide import ci_value, decide
from harness.golden.files import (
    GoldenError,
    GoldenFormatError,
    GoldenMissingError,
    GoldenPathError,
    Stored,
    dtype_name,
    inside,
    item_dir_parts,
    param_component,
    read_golden,
    read_stored,
    rel_path,
    split_test_ref,
    to_stored,
    validate_name,
    write_golden,
)
from harness.golden.message import (
    INT_ROWS,
    GoldenFailure,
    GoldenMismatch,
    file_problem,
    format_failure,
    load_missing,
)
from harness.session import current_arch
from harness.tolerances import DEFAULT_OP, Tolerance, lookup
from harness.versions import triton_version

__all__ = ["Diff", "Golden", "GoldenState", "diff"]

#: Outcomes where the output differs from the golden: an assertion failed. The others are file problems,
#: shown without a traceback.
_DIFFERS = ("fail-mismatch", "fail-foreign")


# ------------------------------------------------------------------------------------------ diffing

def _bits(s: Stored) -> torch.Tensor:
    t = s.tensor
    if s.kind == "fp8":
        return s.codes
    if t.dtype == torch.bool:
        return t
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.view(width)


def _layout_difference(a: Stored, b: Stored) -> str | None:
    """Why ``a`` cannot be compared element-wise with ``b`` (None when it can)."""
    if a.kind != b.kind or a.fmt != b.fmt or (a.kind != "fp8" and a.tensor.dtype != b.tensor.dtype):
        what = lambda s: f"{s.fmt} codes" if s.kind == "fp8" else dtype_name(s.tensor.dtype)  # noqa: E731
        return f"dtype: got {what(a)}, golden holds {what(b)}"
    if tuple(a.tensor.shape) != tuple(b.tensor.shape):
        return f"shape: got {tuple(a.tensor.shape)}, golden holds {tuple(b.tensor.shape)}"
    return None


@dataclass
class Diff:
    """What changed between two stored tensors (for regen reports)."""

    elements: int
    changed: int
    worst_ulp: int | None = None
    worst_abs: float | None = None
    layout: str | None = None   # set when dtype/shape differ (then every element counts as changed)

    def describe(self) -> str:
        if self.layout:
            return f"{self.layout}"
        s = f"{self.changed} / {self.elements} elements changed"
        if self.worst_ulp is not None:
            s += f", worst {self.worst_ulp} ulp"
        if self.worst_abs is not None:
            s += f", worst abs change {self.worst_abs:.3g}"
        return s


def diff(new: Stored, old: Stored) -> Diff:
    """What rewriting ``old`` with ``new`` changes (the regen summary of one file)."""
    n = new.tensor.numel()
    layout = _layout_difference(new, old)
    if layout:
        return Diff(n, n, layout=layout)
    ne = _bits(new) != _bits(old)
    changed = int(ne.sum())
    if not changed:
        return Diff(n, 0)
    if new.kind == "fp8":
        ulp = ulp_distance(new.codes, old.codes, new.fmt)
        a, b = decode(new.codes, new.fmt).double(), decode(old.codes, old.fmt).double()
        worst_ulp = int(ulp[ne].max())  # over changed codes only: an unchanged NaN code is no change
    else:
        a, b = new.tensor.double(), old.tensor.double()
        worst_ulp = None
    fin = torch.isfinite(a) & torch.isfinite(b) & ne
    worst_abs = float((a - b).abs()[fin].max()) if bool(fin.any()) else None
    return Diff(n, changed, worst_ulp, worst_abs)


# ------------------------------------------------------------------------------------------ session

@dataclass
class GoldenState:
    """Per-process bookkeeping of one pytest session (plain data, so xdist workers can ship it)."""

    root: Path
    rootdir: Path
    mode: str = "check"                                 # "check" | "regen" | "regen-all"
    used: set[str] = field(default_factory=set)         # golden files checked or loaded (rel. to rootdir)
    owners: dict[str, str] = field(default_factory=dict)  # checked file -> nodeid
    changes: list[dict[str, Any]] = field(default_factory=list)
    checked: int = 0

    def rel(self, path: Path) -> str:
        return rel_path(path, self.rootdir)

    def claim(self, path: Path, nodeid: str) -> None:
        """Each golden file belongs to one test item: that is what keeps parallel writers apart."""
        rel = self.rel(path)
        owner = self.owners.setdefault(rel, nodeid)
        if owner != nodeid:
            raise GoldenError(f"golden file {rel} is checked by two tests: {owner} and {nodeid}")


def _versions() -> dict[str, Any]:
    # triton_version() reads package metadata: a plain golden user never imports triton.
    return {"torch_version": torch.__version__, "triton_version": triton_version(),
            "numpy_version": np.__version__, "harness_version": harness.__version__}


def _device_name(arch: Any) -> str:
    if getattr(arch, "kind", None) in ("cuda", "rocm") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.cuda.current_device())
    if getattr(arch, "kind", None) == "interp":
        return "triton-interpreter"
    return "cpu"


# ------------------------------------------------------------------------------------------ fixture

class Golden:
    """The ``golden`` fixture: compare tensors of one test item against its golden files."""

    def __init__(self, item: Any, state: GoldenState, op: str | None = None) -> None:
        self._item = item
        self._marker_op = op  # the test's harness_op marker, if any
        self._state = state
        self._stem, self._test, self._param = item_dir_parts(item)
        self._names: set[str] = set()
        self.regenerated: list[str] = []   # messages of checks that rewrote a golden under --golden-regen

    @property
    def dir(self) -> Path:
        """This test item's golden directory."""
        return inside(self._state.root, self._state.root / self._stem / self._test / self._param)

    def path(self, name: str) -> Path:
        """Where the golden ``name`` of this test lives."""
        return inside(self._state.root, self.dir / f"{validate_name(name)}.npz")

    # -- public API -------------------------------------------------------------------------------

    def check(self, name: str, tensor: torch.Tensor, *, fmt: Any = None, tol: Any = None,
              equal_nan: bool = False) -> None:
        """Compare ``tensor`` with the golden ``name`` of this test (see the module docstring for rules)."""
        __tracebackhide__ = True
        validate_name(name)
        check_flag(equal_nan, "equal_nan")
        if tol is not None and not isinstance(tol, Tolerance):
            raise TypeError(f"golden.check: tol must be a harness.tolerances.Tolerance, got {type(tol).__name__}")
        obtained = to_stored(tensor, fmt)
        if tol is not None and obtained.kind == "int":
            raise ValueError(f"golden.check: tol does not apply to {obtained.tensor.dtype} tensors, which "
                             f"always compare exactly")
        failure = self._run(name, obtained, tol, equal_nan)
        if failure is None:
            return
        text = format_failure(failure)
        if failure.outcome == "write-review":
            self.regenerated.append(text)  # the test fails at its end (harness.golden.plugin), after all its checks
        elif failure.outcome in _DIFFERS:
            raise AssertionError(text)
        else:
            import pytest  # a check runs inside a test

            pytest.fail(text, pytrace=False)

    def external(self, rel: str) -> Path:
        """The path of a golden file this test reads itself, in a format of its own (``rel``, under the golden
        root: a capture script's ``lowering/row_sum.npz``), counted as used whether it exists or not, so the
        unused-golden rule knows a test reads it."""
        if not isinstance(rel, str) or not rel or rel.startswith("/") or not rel.endswith(".npz"):
            raise ValueError(f"golden.external: rel must be a relative path of an .npz file under the golden "
                             f"root, got {rel!r}")
        path = inside(self._state.root, self._state.root / rel)
        self._state.used.add(self._state.rel(path))
        return path

    def load(self, name: str, *, test: str | None = None, param: str | None = None
             ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Read a golden, by default this test's own; ``test`` names another test (``test_fn``, or
        ``module_stem::test_fn`` in another module) whose unparametrized golden (``param=None``) or the one
        of param id ``param`` is read. Returns ``(tensor, metadata)``; missing files raise
        :class:`GoldenMissingError` with the command that creates them."""
        validate_name(name)
        stem, tname, pid = self._stem, self._test, self._param
        if test is not None:
            stem, tname = split_test_ref(test, stem)
            pid = "_"
        if param is not None:
            pid = param_component(param)
        path = inside(self._state.root, self._state.root / stem / tname / pid / f"{name}.npz")
        rel = self._state.rel(path)
        self._state.used.add(rel)
        try:
            return read_golden(path, root=self._state.root)
        except GoldenMissingError:
            raise GoldenMissingError(load_missing(rel, self._item.nodeid, None if test is None else tname)) \
                from None

    # -- internals --------------------------------------------------------------------------------

    def _run(self, name: str, obtained: Stored, tol: Any, equal_nan: bool = False) -> GoldenFailure | None:
        """One check: read, decide, compare or write. None when it passed (or wrote and passes)."""
        nodeid = self._item.nodeid
        if name in self._names:
            raise GoldenError(f"golden {name!r} is checked twice in {nodeid}; use distinct names")
        self._names.add(name)
        path = self.path(name)
        rel = self._state.rel(path)
        self._state.claim(path, nodeid)
        self._state.used.add(rel)
        self._state.checked += 1
        state, old, meta, err = self._read(path)
        gen = meta.get("arch") if old is not None else getattr(err, "arch", None)
        here = getattr(current_arch(), "name", None)
        d = decide(self._state.mode, state, None if gen is None else gen == here)
        mismatch = None
        if d.compare == "tolerance":
            mismatch = self._compare(name, rel, obtained, old, meta, tol, equal_nan)
            differs = mismatch is not None
        else:
            differs = d.compare == "content" and self._content_differs(obtained, old, meta)
        outcome = d.if_differs if differs else d.if_equal
        if outcome == "pass":
            return None
        change = ""
        if outcome in ("write", "write-review"):
            reason = file_problem(state, err) or ("regen-all" if outcome == "write" else "mismatch")
            change = self._write(path, rel, name, obtained, old, "created" if state == "missing" else "rewritten",
                                 reason, equal_nan)
            if outcome == "write":
                return None
        return GoldenFailure(outcome, name, rel, nodeid, state, gen, here, ci=ci_value() is not None, error=err,
                             mismatch=mismatch, change=change)

    def _read(self, path: Path) -> tuple[str, Stored | None, dict[str, Any], GoldenError | None]:
        """(file state, stored golden, metadata, error) of one golden file; the state is decide()'s."""
        try:
            old, meta = read_stored(path, root=self._state.root)
        except GoldenMissingError:
            return "missing", None, {}, None
        except GoldenPathError as e:
            return "refused", None, {}, e
        except GoldenFormatError as e:
            return "unreadable", None, {}, e
        return "readable", old, meta, None

    def _op(self) -> str:
        return self._marker_op or DEFAULT_OP

    def _dtype_key(self, obtained: Stored) -> str:
        case = getattr(self._item, "funcargs", {}).get("dtype_case")
        case_id = getattr(case, "id", None)
        return case_id if isinstance(case_id, str) else obtained.short_dtype

    def _meta(self, name: str, obtained: Stored) -> dict[str, Any]:
        arch = current_arch()
        funcargs = getattr(self._item, "funcargs", {})
        seed = funcargs.get("seed")
        if seed is None and isinstance(funcargs.get("rng"), torch.Generator):
            seed = funcargs["rng"].initial_seed()
        case = getattr(funcargs.get("dtype_case"), "id", None)
        return {
            "name": name,
            "test": {"module": self._stem, "test": self._test, "param": self._param,
                     "nodeid": self._item.nodeid},
            "op": self._marker_op,
            "dtype_case": case if isinstance(case, str) else None,
            "seed": int(seed) if isinstance(seed, int) else None,
            "arch": getattr(arch, "name", str(arch)),
            "device": _device_name(arch),
            **_versions(),
        }

    def _content_differs(self, obtained: Stored, old: Stored, old_meta: dict[str, Any]) -> bool:
        if _layout_difference(obtained, old) or bool((_bits(obtained) != _bits(old)).any()):
            return True
        new_meta = self._meta(str(old_meta.get("name")), obtained)
        return any(new_meta.get(k) != old_meta.get(k) for k in ("op", "dtype_case"))

    def _write(self, path: Path, rel: str, name: str, obtained: Stored, old: Stored | None, action: str,
               reason: str, equal_nan: bool = False) -> str:
        """Write the golden and record the change (``--golden-changes``); returns its one-line summary."""
        if ci_value() is not None:
            raise GoldenError(f"refusing to write golden {rel}: CI is set (goldens are captured locally)")
        if obtained.kind == "fp8" and not equal_nan:
            n_nan = int(is_nan_code(obtained.codes, obtained.fmt).sum())
            if n_nan:
                raise GoldenError(f"golden {name!r}: refusing to store {n_nan} NaN code(s): NaN never passes unless "
                                  f"asked, so the golden could never pass; pass golden.check(..., equal_nan=True) "
                                  f"if the NaN codes are expected")
        write_golden(path, obtained, self._meta(name, obtained), root=self._state.root)
        d = diff(obtained, old) if old is not None else None
        n = obtained.tensor.numel()
        change = {
            "path": rel, "nodeid": self._item.nodeid, "name": name, "action": action, "reason": reason,
            "dtype": dtype_name(obtained.tensor.dtype), "fmt": obtained.fmt,
            "shape": list(obtained.tensor.shape), "elements": n,
            "changed": n if d is None else d.changed,
            "worst_ulp": None if d is None else d.worst_ulp,
            "worst_abs": None if d is None or d.worst_abs is None or not math.isfinite(d.worst_abs)
            else d.worst_abs,
            "layout": None if d is None else d.layout,
            "summary": f"new, {n} elements" if d is None else d.describe(),
        }
        self._state.changes.append(change)
        return change["summary"]

    def _tolerance(self, obtained: Stored, meta: dict[str, Any], tol: Any, arch: Any
                   ) -> tuple[Any, bool, str]:
        """(tolerance, exact?, why) for this comparison: ``tol=``, bit-exact on the golden's own arch, else
        the table's ``golden/<op>`` row of its own, else the ``<op>`` row (``harness.tolerances.lookup``)."""
        gen = meta.get("arch")
        if tol is not None:
            return tol, False, "explicit tol="
        if gen == getattr(arch, "name", None):
            exact = Tolerance(max_ulp=0) if obtained.kind == "fp8" else Tolerance()
            key = f"golden/exact/{getattr(arch, 'name', arch)}"
            exact = exact.with_(key=key, note="same arch as the golden: bit-exact")
            return exact, True, "same arch: bit-exact"
        op, dtype = self._op(), self._dtype_key(obtained)
        kind = "codes" if obtained.kind == "fp8" else "float"  # a float row never judges FP8 codes, nor the reverse
        why = f"cross-arch ({gen} -> {arch.name})"
        try:  # a golden/<op> row of its own first; a wildcard-op row it falls back to does not count
            t = lookup(f"golden/{op}", dtype, arch, kind=kind)
            if t.op == f"golden/{op}":
                return t, False, why
        except KeyError:
            pass
        try:
            return lookup(op, dtype, arch, kind=kind), False, why
        except KeyError as e:
            raise GoldenError(
                f"golden was generated on {gen}, running on {arch.name}, and the tolerance table has no row "
                f"for it: add op 'golden/{op}' (or '{op}') dtype {dtype!r} arch {arch.name!r}, or pass tol=. "
                f"{e.args[0] if e.args else e}"
            ) from None

    def _compare(self, name: str, rel: str, obtained: Stored, old: Stored, meta: dict[str, Any],
                 tol: Any, equal_nan: bool = False) -> GoldenMismatch | None:
        """None when ``obtained`` matches the golden, else the record of what differs."""
        arch = current_arch()
        m = GoldenMismatch(name=name, path=rel, generated_on=meta.get("arch"), device=meta.get("device"),
                           torch_version=meta.get("torch_version"), triton_version=meta.get("triton_version"),
                           running_on=getattr(arch, "name", arch), n=obtained.tensor.numel())
        layout = _layout_difference(obtained, old)
        if layout:
            m.layout = layout
            return m
        same_bits = not bool((_bits(obtained) != _bits(old)).any())
        op, dtype = f"golden/{self._op()}", self._dtype_key(obtained)
        if obtained.kind == "int":
            summary.record(op=op, dtype=dtype, arch=arch, n=obtained.tensor.numel(),
                           tol=Tolerance(key="golden/exact/integer"),
                           passed=same_bits, worst_abs=_int_worst(obtained, old))
            if same_bits:
                return None
            ne = obtained.tensor != old.tensor
            m.int_k = int(ne.sum())
            m.int_rows = [(tuple(at), obtained.tensor[tuple(at)].item(), old.tensor[tuple(at)].item())
                          for at in ne.nonzero()[:INT_ROWS].tolist()]
            return m
        t, exact, why = self._tolerance(obtained, meta, tol, arch)
        m.tol, m.why = t, why
        # Always run the comparison, even when the bits are equal: it records the observation that the
        # session table (harness.summary) shows per op x dtype x arch.
        if obtained.kind == "fp8":
            m.mismatch = check_fp8(obtained.codes, old.codes, obtained.fmt, t, op=op, dtype=dtype,
                                   nan_equal=equal_nan)
        else:
            m.mismatch = check_close(obtained.tensor, old.tensor, t, op=op, dtype=dtype, equal_nan=equal_nan)
        if m.mismatch is None and exact and not same_bits:
            m.bits_differ = int((_bits(obtained) != _bits(old)).sum())
        if m.mismatch is None and not m.bits_differ:
            return None
        return m


def _int_worst(a: Stored, b: Stored) -> float | None:
    if a.tensor.numel() == 0:
        return None
    if a.tensor.dtype == torch.bool:
        return float((a.tensor != b.tensor).any())
    return float((a.tensor.to(torch.float64) - b.tensor.to(torch.float64)).abs().max())
