"""One tolerance table, keyed by (op, dtype, arch).

Why a table and not literals in tests: a tolerance is a *measured fact about an arch* (the interpreter's
FP8 casts are off by several codes near the subnormal range; H200 casts are exact), so it belongs next to
the note that says how it was measured, and a test should only name what it checks.

Two kinds of rule: a *float* rule (rtol/atol, ``max_ulp`` unset) for float tensors and a *code* rule
(``max_ulp`` set, optionally ``ulp_floor``) for FP8 codes. A row is one or the other, never both, and
``harness.compare`` refuses a row of the wrong kind: a float row read as FP8 codes used to mean "0 ULP", an
FP8 row read as floats "rtol = atol = 0", both silently.

Precedence (``lookup``), three nested loops, the first row found wins:

1. op:    the test's op, then ``"*"``. The op is the outermost loop: ANY row of the op, even at ``*`` arch and
          ``*`` dtype, beats every wildcard-op row, even one at the exact arch and dtype. A wildcard-op row
          is a default for ops that have no rows of their own, never a cap on the ones that do.
2. arch:  ``Arch.chain()``: the exact name (``sm86``), its family (``sm80``), its kind (``cuda``), ``"*"``.
          Within one op the arch beats the dtype: ``op/*/sm90`` wins over ``op/bf16/cuda`` on sm90.
3. dtype: the key as given (a case id ``bf16-e4nv`` or a short name ``bf16``), then the source part of a
          case id (``bf16``), then ``"*"``.

With ``kind="float"`` / ``kind="codes"`` rows of the other kind are skipped (and named in the error), so the
walk goes on to a row that fits. A miss raises ``KeyError`` listing every key tried; there is no silent
default beyond the rows below.

Whose table: a :class:`ToleranceTable` object holds the rows. The module functions (``register``,
``lookup``, ``load_toml``, ``rows``, ``reset``) act on the *active* table: the running session's
(:attr:`harness.session.Session.tolerances`), else the module's own base table (defaults plus whatever
plain Python registered). Each session builds its own (``session_table``: a copy of the base table, then the
ini's TOML rows; conftest.py and test code registering later win on the same key), so a pytester session
nested in a test neither sees the outer session's TOML rows nor leaves its own behind.

Row origins are printed relative to the session's rootdir (``tests/tolerances/qsa.toml:42``).

A row that could never be looked up is refused, not kept dead: its dtype must be ``*`` or a name the harness keys
on (:func:`known_dtype`), its arch ``*``, a kind or a known arch. A TOML row whose (op, dtype, arch) another TOML
row already defined (in the same file or another) is refused naming both places: only Python (conftest.py) may
replace a row on purpose.
"""

from __future__ import annotations

import difflib
import glob
import math
import numbers
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from harness.arch import Arch, parse_arch
from harness.session import current

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = ["DEFAULT_OP", "Tolerance", "ToleranceTable", "active_table", "base_table", "known_dtype", "load_globs",
           "load_toml", "lookup", "register", "reset", "rows", "session_table"]

#: The op of a check whose test has no ``harness_op`` marker (the tolerance fixture, goldens): no rows of its own,
#: so the wildcard-op rows (torch.testing's defaults) apply.
DEFAULT_OP = "default"


@dataclass(frozen=True)
class Tolerance:
    """A comparison rule. ``key`` names the table row it came from, so failures can say which applied."""

    rtol: float = 0.0
    atol: float = 0.0
    max_ulp: int | None = None
    ulp_floor: float = 0.0
    max_mismatch: float = 0.0
    key: str = ""
    note: str = ""
    # The row's identity as data (set by register; empty for a rule built by hand): which (op, dtype, arch)
    # row of the table this is, and where it was defined ("path/to/rows.toml:12", "built-in", "python").
    op: str = field(default="", compare=False)
    dtype: str = field(default="", compare=False)
    arch: str = field(default="", compare=False)
    origin: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        for name in ("key", "note", "op", "dtype", "arch", "origin"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"Tolerance.{name} must be a str, got {type(getattr(self, name)).__name__}")
        for name in ("rtol", "atol", "ulp_floor", "max_mismatch"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
                raise ValueError(f"Tolerance.{name} must be a finite number >= 0, got {v!r}")
        if self.max_mismatch > 1:
            raise ValueError(f"Tolerance.max_mismatch is a fraction in [0, 1], got {self.max_mismatch!r}")
        if self.max_ulp is not None and (
            not isinstance(self.max_ulp, int) or isinstance(self.max_ulp, bool) or self.max_ulp < 0
        ):
            raise ValueError(f"Tolerance.max_ulp must be an int >= 0 or None, got {self.max_ulp!r}")
        if self.max_ulp is not None and (self.rtol or self.atol):
            raise ValueError(
                f"Tolerance: rtol/atol belong to a float rule and max_ulp to an FP8 code rule; got both "
                f"(rtol={self.rtol!r}, atol={self.atol!r}, max_ulp={self.max_ulp!r})"
            )
        if self.max_ulp is None and self.ulp_floor:
            raise ValueError(f"Tolerance.ulp_floor={self.ulp_floor!r} needs max_ulp (it relaxes an FP8 code rule)")

    @property
    def kind(self) -> str:
        """``"codes"`` (an FP8 code rule: max_ulp set) or ``"float"`` (rtol/atol)."""
        return "float" if self.max_ulp is None else "codes"

    def with_(self, **changes: Any) -> Tolerance:
        """A copy with fields overridden (per-test override); the key records that it was overridden."""
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise TypeError(f"unknown Tolerance field(s): {', '.join(sorted(unknown))}")
        key = changes.pop("key", None) or (f"{self.key}+override" if self.key else "override")
        return replace(self, key=key, **changes)

    def allowed(self, expected_abs: float) -> float:
        """Absolute error allowed at an expected magnitude: atol + rtol·|expected|."""
        if isinstance(expected_abs, bool) or not (isinstance(expected_abs, numbers.Real)
                                                  or hasattr(expected_abs, "dtype")):  # numpy / torch arrays
            raise TypeError(f"expected_abs: expected a number or a tensor of |expected|; got "
                            f"{type(expected_abs).__name__}")
        return self.atol + self.rtol * expected_abs

    def __repr__(self) -> str:
        parts = []
        if self.rtol or self.atol or self.max_ulp is None:
            parts.append(f"rtol={self.rtol:.1e}, atol={self.atol:.1e}")
        if self.max_ulp is not None:
            parts.append(f"max_ulp={self.max_ulp}")
        if self.ulp_floor:
            parts.append(f"ulp_floor={self.ulp_floor:.1e}")
        if self.max_mismatch:
            parts.append(f"max_mismatch={self.max_mismatch:.2%}")
        s = f"Tolerance({', '.join(parts)})"
        return f"{s} [{self.key}]" if self.key else s


_Key = tuple[str, str, str]
_FIELDS = {"rtol", "atol", "max_ulp", "ulp_floor", "max_mismatch", "note"}


#: The names a table lookup keys dtypes by, spelled here so that loading the plugin imports no torch:
#: harness.dtypes' float short names, harness.fp8's formats, harness.mx's schemes and scale rules
#: (tests/harness/test_tolerances.py checks they agree).
FLOAT_NAMES = ("fp16", "bf16", "fp32", "fp64")
FP8_NAMES = ("e4nv", "e5m2", "e4b15", "e4m3fnuz", "e5m2fnuz")
MX_NAMES = ("mxfp4", "nvfp4", "mxfp6e2m3", "mxfp6e3m2", "mxfp8e4m3", "mxfp8e5m2")
MX_RULES = ("floor", "ceil", "even", "rceil")
_ARCH_WORDS = ("*", "cuda", "rocm", "interp", "cpu")


def known_dtype(d: str) -> bool:
    """Whether a row keyed by dtype ``d`` can ever be looked up: ``*``, a float, FP8 or MX name, or a case id
    (``bf16-e4nv``, ``bf16-nvfp4``, ``bf16-mxfp4-rceil``)."""
    if d == "*" or d in FLOAT_NAMES or d in FP8_NAMES or d in MX_NAMES:
        return True
    parts = d.split("-")
    if len(parts) == 2:
        return parts[0] in FLOAT_NAMES and (parts[1] in FP8_NAMES or parts[1] in MX_NAMES)
    return len(parts) == 3 and parts[0] in FLOAT_NAMES and parts[1] in MX_NAMES and parts[2] in MX_RULES


def _check_dtype(d: str) -> str:
    if not known_dtype(d):
        names = [*FLOAT_NAMES, *FP8_NAMES, *MX_NAMES]
        near = difflib.get_close_matches(d, names, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ValueError(f"dtype {d!r} is no dtype the harness looks rows up by{hint}: a row under it would never "
                         f"apply; expected '*', one of {', '.join(names)}, or a case id such as 'bf16-e4nv', "
                         f"'bf16-nvfp4' or 'bf16-mxfp4-rceil'")
    return d


def _norm_dtype(dtype: Any) -> str:
    if isinstance(dtype, str):
        return dtype
    # torch dtypes, FP8Format objects and DtypeCase objects all map to their short names
    for attr in ("id", "name"):
        v = getattr(dtype, attr, None)
        if isinstance(v, str):
            return v
    if type(dtype).__module__ == "torch":  # a torch dtype: torch is imported already, and so may the table be
        from harness.dtypes import short_name

        short = short_name(dtype)
        if short is not None:
            return short
    raise TypeError(f"dtype must be a short name such as 'bf16' or 'bf16-e4nv', got {dtype!r}")


class ToleranceTable:
    """Rows keyed by (op, dtype, arch); ``lookup`` walks them in the precedence order of the module docstring.

    An object rather than module state so that each pytest session owns one (see the module docstring);
    plain Python can build its own too: ``ToleranceTable.with_defaults()``.
    """

    def __init__(self, rows: dict[_Key, Tolerance] | None = None) -> None:
        self._rows: dict[_Key, Tolerance] = dict(rows or {})

    @classmethod
    def with_defaults(cls) -> ToleranceTable:
        """A table holding only the built-in rows (torch.testing's float defaults, exact FP8 casts)."""
        table = cls()
        _install_defaults(table)
        return table

    def copy(self) -> ToleranceTable:
        return ToleranceTable(self._rows)

    def register(self, op: str, dtype: Any, arch: str | Arch, tol: Tolerance, *, origin: str = "python") -> None:
        """Add or replace a row. ``arch`` may be a name, a family, a kind (``cuda``) or ``*``."""
        if not isinstance(op, str) or not op:
            raise ValueError(f"op must be a non-empty string, got {op!r}")
        if not isinstance(tol, Tolerance):
            raise TypeError(f"tol must be a Tolerance, got {type(tol).__name__}")
        self._rows[self._key(op, dtype, arch)] = self._row(op, dtype, arch, tol, origin)

    @staticmethod
    def _key(op: str, dtype: Any, arch: str | Arch) -> _Key:
        if not isinstance(arch, (str, Arch)):
            raise TypeError(f"arch must be a str or Arch, got {type(arch).__name__}")
        a = arch.name if isinstance(arch, Arch) else arch
        if a not in _ARCH_WORDS:
            a = parse_arch(a).name  # validates and normalises sm_90 -> sm90
        return op, _check_dtype(_norm_dtype(dtype)), a

    def _row(self, op: str, dtype: Any, arch: str | Arch, tol: Tolerance, origin: str) -> Tolerance:
        key = self._key(op, dtype, arch)
        return replace(tol, key="/".join(key), op=key[0], dtype=key[1], arch=key[2], origin=origin)

    def lookup(self, op: str, dtype: Any, arch: str | Arch, *, kind: str | None = None) -> Tolerance:
        """The first row in precedence order (module docstring) for (op, dtype, arch), of ``kind`` when given
        (``"float"`` or ``"codes"``); ``KeyError`` listing the keys tried if none."""
        if not isinstance(op, str) or not op:
            raise ValueError(f"op must be a non-empty string, got {op!r}")
        if kind not in (None, "float", "codes"):
            raise ValueError(f"kind must be None, 'float' or 'codes', got {kind!r}")
        a = parse_arch(arch)
        d = _norm_dtype(dtype)
        dtypes = [d]
        if "-" in d:
            dtypes.append(d.split("-", 1)[0])
        dtypes.append("*")
        tried, skipped = [], []
        for o in dict.fromkeys((op, "*")):
            for ak in a.chain():
                for dk in dict.fromkeys(dtypes):
                    k = (o, dk, ak)
                    tried.append("/".join(k))
                    row = self._rows.get(k)
                    if row is None:
                        continue
                    if kind is not None and row.kind != kind:
                        skipped.append(f"{row.key} ({row.kind} rule)")
                        continue
                    return row
        what = f" {kind} rule" if kind else ""
        msg = f"no{what} tolerance row for op={op!r} dtype={d!r} arch={a.name!r}; tried: {', '.join(tried)}"
        if skipped:
            msg += f"; skipped rows of the other kind: {', '.join(skipped)}"
        raise KeyError(msg)

    def load_toml(self, path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> int:
        """Load ``[[tolerance]]`` rows (op, dtype, arch + Tolerance fields); returns how many were added.

        All or nothing: a bad row raises before any row of the file is added. Origins and errors name the file
        relative to ``root`` when it lies inside (a session passes its rootdir), else as given. Only a regular
        file is read (a FIFO would block the session start)."""
        p = _shown_path(path, root)
        try:
            mode = os.stat(path).st_mode
        except OSError as e:
            raise ValueError(f"tolerance file {p}: cannot be read: {e.strerror or e}") from None
        if not stat.S_ISREG(mode):
            raise ValueError(f"tolerance file {p}: not a regular file; expected a TOML file of [[tolerance]] rows")
        try:
            text = Path(path).read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"tolerance file {p}: not UTF-8 text (byte {e.start}); TOML files are UTF-8") from None
        except OSError as e:
            raise ValueError(f"tolerance file {p}: cannot be read: {e.strerror or e}") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"tolerance file {p}: invalid TOML: {e}") from None
        unknown = sorted(set(data) - {"tolerance"})
        near = [k for k in unknown if difflib.get_close_matches(k.lower(), ["tolerance"], n=1)]
        # a misspelt [[tolerances]] loaded no row, silently; a file of other tables only (a glob that also matches
        # pyproject.toml) holds no rows and is no error
        if near or (unknown and "tolerance" in data):
            raise ValueError(f"tolerance file {p}: unknown top-level key(s) {', '.join(map(repr, unknown))}; a "
                             f"tolerance file holds only [[tolerance]] rows" + (" (did you mean [[tolerance]]?)"
                                                                                if near else ""))
        entries = data.get("tolerance", [])
        if not isinstance(entries, list) or not all(isinstance(r, dict) for r in entries):
            raise ValueError(f"tolerance file {p}: 'tolerance' must be an array of tables ([[tolerance]])")
        headers = _row_lines(text)
        staged = ToleranceTable()
        for i, row in enumerate(entries):
            line = headers[i] if i < len(headers) else None
            where = f"tolerance file {p}" + (f":{line}" if line else "") + f", row {i + 1}"
            missing = {"op", "dtype", "arch"} - set(row)
            if missing:
                raise ValueError(f"{where}: missing {', '.join(sorted(missing))}")
            extra = set(row) - _FIELDS - {"op", "dtype", "arch"}
            if extra:
                raise ValueError(f"{where}: unknown field(s) {', '.join(sorted(extra))}; known: {sorted(_FIELDS)}")
            for name in ("op", "dtype", "arch"):
                if not isinstance(row[name], str) or not row[name]:
                    raise ValueError(f"{where}: {name} must be a non-empty string, got {row[name]!r}")
            if "note" in row and not isinstance(row["note"], str):
                raise ValueError(f"{where}: note must be a string, got {row['note']!r}")
            kwargs = {k: v for k, v in row.items() if k in _FIELDS}
            origin = f"{p}:{line}" if line else f"{p}, row {i + 1}"
            try:
                tol = self._row(row["op"], row["dtype"], row["arch"], Tolerance(**kwargs), origin)
            except (TypeError, ValueError) as e:
                raise ValueError(f"{where}: {e}") from None
            key = (tol.op, tol.dtype, tol.arch)
            earlier = staged._rows.get(key) or self._rows.get(key)
            if earlier is not None and earlier.origin not in ("default", "python"):
                raise ValueError(f"{where}: row {tol.key} is already defined at {earlier.origin}; one row per "
                                 f"(op, dtype, arch): remove one (conftest.py may replace a row with register())")
            staged._rows[key] = tol
        self._rows.update(staged._rows)
        return len(entries)

    def load_globs(self, patterns: Iterable[str], root: str | os.PathLike[str]) -> list[Path]:
        """Load every file matching the patterns (relative to ``root``).

        A literal path that does not exist is an error (a typo would silently drop rows); a wildcard pattern
        may match nothing.
        """
        loaded = []
        for pat in patterns:
            matches = sorted(glob.glob(os.path.join(os.fspath(root), pat)))
            if not matches and not glob.has_magic(pat):
                raise FileNotFoundError(f"harness_tolerance_files: {pat!r} does not exist under {root}")
            for m in matches:
                self.load_toml(m, root=root)
                loaded.append(Path(m))
        return loaded

    def rows(self) -> dict[_Key, Tolerance]:
        """A copy of the rows (for reports and tests)."""
        return dict(self._rows)

    def reset(self) -> None:
        """Drop project rows and restore the built-in defaults."""
        self._rows.clear()
        _install_defaults(self)

    def __len__(self) -> int:
        return len(self._rows)

    def __repr__(self) -> str:
        return f"<ToleranceTable of {len(self._rows)} rows>"


_HEADER = re.compile(r"""\s*\[\[\s*(?:tolerance|"tolerance"|'tolerance')\s*\]\]""")


def _row_lines(text: str) -> list[int]:
    """The line of each ``[[tolerance]]`` header, in order: tomllib keeps no positions, and the i-th row is the
    i-th header. A line that only looks like one, inside a multi-line string (a row's ``note = \"\"\"...``), is
    none: the text before it then does not parse (an unterminated string). Only called on a file that parses."""
    lines = text.splitlines(keepends=True)
    out = []
    for n, line in enumerate(lines):
        if not _HEADER.match(line):
            continue
        try:
            tomllib.loads("".join(lines[:n]))
        except tomllib.TOMLDecodeError:
            continue
        out.append(n + 1)
    return out


def _shown_path(path: str | os.PathLike[str], root: str | os.PathLike[str] | None) -> str:
    """``path`` relative to ``root`` (posix) when it lies inside, else as given."""
    if root is not None:
        try:
            return Path(os.path.abspath(path)).relative_to(os.path.abspath(root)).as_posix()
        except ValueError:
            pass
    return os.fspath(path)


def _install_defaults(table: ToleranceTable) -> None:
    # Float outputs: torch.testing's defaults, so a harness check is never looser than assert_close.
    for dtype, rtol, atol in (("fp16", 1e-3, 1e-5), ("bf16", 1.6e-2, 1e-5), ("fp32", 1.3e-6, 1e-5),
                              ("fp64", 1e-7, 1e-7)):
        table.register("*", dtype, "*", Tolerance(rtol=rtol, atol=atol, note="torch.testing default"),
                       origin="default")
    # FP8 casts on hardware: exact. Measured on an H200 (sm90, triton 3.6): every fp16/bf16 input and 2.1M
    # fp32 inputs bit-identical to harness.fp8.encode (docs/MEASUREMENTS.md).
    for kind in ("cuda", "rocm"):
        table.register("fp8_cast", "*", kind, Tolerance(max_ulp=0, note="hardware casts are exact"), origin="default")
    # The interpreter's casts are wrong against hardware (docs/MEASUREMENTS.md), but they are deterministic,
    # and harness.fp8.encode(arch="interp") reproduces them bit for bit; so against that model they are
    # exact too. Cross-lane comparisons (interpreter output vs an H200 golden) need their own rows.
    table.register("fp8_cast", "*", "interp", Tolerance(max_ulp=0, note="encode(arch='interp') models the "
                   "interpreter's own converter"), origin="default")


# --- the active table -------------------------------------------------------------------------------------

#: The table of plain Python (no pytest session active); each session starts from a copy of it.
_BASE = ToleranceTable.with_defaults()


def base_table() -> ToleranceTable:
    """The table of plain Python: what every session's table starts from."""
    return _BASE


def active_table() -> ToleranceTable:
    """The table the module functions act on: the running session's, else the base table."""
    s = current()
    return s.tolerances if s is not None else _BASE


def session_table(patterns: Iterable[str] = (), root: str | os.PathLike[str] = ".") -> ToleranceTable:
    """A new session's table: a copy of the base table (never of another session's) plus the rows of the
    TOML files matching ``patterns`` under ``root``. Errors as ``load_globs``; nothing is activated."""
    table = _BASE.copy()
    table.load_globs(patterns, root)
    return table


def register(op: str, dtype: Any, arch: str | Arch, tol: Tolerance, *, origin: str = "python") -> None:
    """Add or replace a row of the active table (``ToleranceTable.register``)."""
    active_table().register(op, dtype, arch, tol, origin=origin)


def lookup(op: str, dtype: Any, arch: str | Arch, *, kind: str | None = None) -> Tolerance:
    """The active table's row for (op, dtype, arch) (``ToleranceTable.lookup``)."""
    return active_table().lookup(op, dtype, arch, kind=kind)


def load_toml(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> int:
    """Load a TOML file's rows into the active table (``ToleranceTable.load_toml``)."""
    return active_table().load_toml(path, root=root)


def load_globs(patterns: Iterable[str], root: str | os.PathLike[str]) -> list[Path]:
    """Load the files matching ``patterns`` into the active table (``ToleranceTable.load_globs``)."""
    return active_table().load_globs(patterns, root)


def rows() -> dict[_Key, Tolerance]:
    """A copy of the active table's rows."""
    return active_table().rows()


def reset() -> None:
    """The active table back to the built-in defaults."""
    active_table().reset()
