"""Golden outputs: a kernel's output captured once on a reference GPU, compared on every later run.

Why goldens at all: a torch reference says what a kernel *should* compute; a golden says what it *did*
compute on the H200 the last time somebody looked. A change in either direction (a compiler upgrade, a
refactor) then shows up as a diff even when both are still "close" to the reference.

One workflow (pytest-regressions style), decided by :func:`decide` from (mode, file state, same arch) and
carried out by :meth:`Golden.check`:

* no golden file: fail with the exact command that creates it; nothing is written;
* a golden file: compare; on mismatch fail with the report table and leave the file untouched;
* ``--golden-regen``: a failing check rewrites its file, and the test still fails ("regenerated");
* ``--golden-regen-all``: every check re-captures its file (written only when the content changed) and
  passes; what changed is listed in the terminal summary and in ``--golden-changes=PATH``;
* a golden captured on another arch (also a damaged one whose metadata still names that arch) is compared,
  never rewritten, in every mode; the failure prints ``rm <file> && python -m harness golden regen <test>``
  to replace it on purpose (a regen run creates a missing golden);
* a path that is not a regular file inside the golden dir (a symlink to a file or directory, a symlinked
  golden dir, a directory or FIFO where the file belongs) is never opened, followed or replaced: every mode
  fails naming it. File types are checked with ``lstat`` before opening, and the open itself uses
  ``O_NOFOLLOW | O_NONBLOCK``, so a FIFO never blocks a run.

Default tolerance (``tol=None``): on the arch that generated the golden, bit-exact (FP8: zero ULP and the
same codes); on another arch the tolerance table, op ``golden/<harness_op>`` when the table has a row for
exactly that op, else the kernel's own op ``<harness_op>`` (which falls back to ``*``); ``harness_op`` is
``default`` without a ``@pytest.mark.harness_op``. The dtype key is the test's ``dtype_case`` id when it
has one, else the FP8 format (``e4nv``) or the float dtype (``bf16``). Integer and bool tensors always
compare exactly. An explicit ``tol=`` wins. FP8 goldens compare codes: a NaN code the golden recorded must
face a NaN code; float goldens never hold NaN (refused at write, since NaN never compares equal).

``--golden-regen-all`` rewrites a file only when its content changed: the tensor's bits, dtype, shape or
FP8 format, or the op / dtype case. A new torch/triton version alone does not rewrite it (no churn).
Metadata (JSON, sorted keys, no timestamps): format_version, name, test (module/test/param/nodeid), op,
dtype_case, dtype, fmt, storage, shape, seed, arch, device, torch/triton/numpy/harness versions.

File layout: ``<golden_dir>/<module stem>/<test name>/<param id or "_">/<name>.npz``; ``test name`` has no
parameters (``Class.method`` inside a class). The file is a plain ``.npz`` (``np.load(...,
allow_pickle=False)`` reads it) with two members: ``tensor`` (the values; bf16 as its uint16 bits, FP8 as
uint8 codes) and ``meta`` (UTF-8 JSON as a uint8 array). The zip is written by hand, stored
(uncompressed) with fixed dates and attributes, so the same tensor gives the same bytes on any machine.
The loader trusts nothing in the file: each metadata field's type, the dtype/storage/format agreement and
the array's shape are checked, and any problem is a :class:`GoldenFormatError` naming the file.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import json
import math
import os
import re
import stat
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

__all__ = [
    "FORMAT_VERSION",
    "Golden",
    "GoldenError",
    "GoldenFormatError",
    "GoldenMissingError",
    "GoldenPathError",
    "GoldenState",
    "Decision",
    "decide",
    "read_golden",
    "recapture_command",
    "write_golden",
    "encode_golden",
    "item_dir_parts",
    "sanitize_component",
    "validate_name",
]

#: Bumped whenever the file layout changes; the loader refuses any other version.
FORMAT_VERSION = 1

_TENSOR_MEMBER = "tensor.npy"
_META_MEMBER = "meta.npy"
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest date zip can store: no timestamps in goldens
_REQUIRED_META = ("format_version", "name", "dtype", "storage", "shape", "arch", "harness_version")


class GoldenError(Exception):
    """A golden file cannot be used (missing, unreadable, or claimed twice)."""


class GoldenMissingError(GoldenError, FileNotFoundError):
    """The golden file does not exist."""


class GoldenFormatError(GoldenError, ValueError):
    """The golden file exists but is truncated, corrupt, or of another format version.

    ``arch`` is the arch the file's metadata names when that much could be read (else None): a regen run
    repairs a damaged golden of its own arch, never one captured elsewhere."""

    def __init__(self, message: str, *, arch: str | None = None) -> None:
        super().__init__(message)
        self.arch = arch


class GoldenPathError(GoldenFormatError):
    """The golden path is not a regular file inside the golden dir (a symlink, a directory, a FIFO, or a
    path that leaves the dir). Never read, written or replaced, in any mode: the message says what to do."""


# --------------------------------------------------------------------------------------------- paths

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_TEST_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]")
_MAX_COMPONENT = 120


def validate_name(name: Any, *, arg: str = "name") -> str:
    """A golden name is user input: anything that is not a plain file stem is rejected, not rewritten."""
    if not isinstance(name, str):
        raise TypeError(f"golden {arg} must be a str, got {type(name).__name__}")
    if not _NAME_RE.fullmatch(name) or ".." in name or name.endswith("."):
        raise ValueError(
            f"golden {arg} {name!r} is not allowed: expected letters, digits, '.', '_' or '-' (starting with "
            f"a letter or digit, no '..', at most 100 characters), so the file stays inside the golden dir"
        )
    return name


def sanitize_component(s: str) -> str:
    """Map a derived path part (param id, test name) to one safe directory name, deterministically.

    Odd characters become ``_``; a leading dot is replaced (no ``.``/``..``/hidden dirs); long ids are
    cut and suffixed with a hash. Two ids that sanitize alike are caught as a collision at collection.
    """
    out = _UNSAFE.sub("_", s)
    if not out:
        return "_"
    if out.startswith("."):
        out = "_" + out[1:]
    if len(out) > _MAX_COMPONENT:
        digest = hashlib.sha256(s.encode("utf-8")).hexdigest()[:16]
        out = f"{out[:_MAX_COMPONENT - 17]}-{digest}"
    return out


def item_dir_parts(item: Any) -> tuple[str, str, str]:
    """(module stem, test name, param id or "_") of a pytest item, each already sanitized."""
    stem = Path(str(item.path)).stem
    names = []
    parent = getattr(item, "parent", None)
    while isinstance(parent, pytest.Class):
        names.append(parent.name)
        parent = getattr(parent, "parent", None)
    test = getattr(item, "originalname", None) or item.name.split("[", 1)[0]
    full = ".".join([*reversed(names), test])
    callspec = getattr(item, "callspec", None)
    param = callspec.id if callspec is not None else "_"
    return sanitize_component(stem), sanitize_component(full), sanitize_component(param)


def rel_path(path: str | os.PathLike[str], rootdir: str | os.PathLike[str]) -> str:
    """``path`` relative to ``rootdir`` in posix form (how goldens are named in reports), else absolute."""
    p = Path(os.path.abspath(path))
    try:
        return p.relative_to(Path(os.path.abspath(rootdir))).as_posix()
    except ValueError:
        return p.as_posix()


def _inside(root: Path, path: Path) -> Path:
    r = Path(os.path.abspath(root))
    p = Path(os.path.abspath(path))
    if os.path.commonpath([r, p]) != str(r) or p == r:
        raise GoldenPathError(f"golden path {p} escapes the golden dir {r}")
    return p


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _kind(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def _symlink_error(what: str, path: Path) -> GoldenPathError:
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return GoldenPathError(
        f"{what} {path} is a symlink (-> {target}); goldens are read and written only as regular files in real "
        f"directories of the golden dir, so a link could make a run read or overwrite a file elsewhere: "
        f"replace the link with the real {'file' if what == 'golden file' else 'directory'}"
    )


def _walk(root: Path | None, path: Path, *, create: bool) -> Path | None:
    """Check the directories from ``root`` down to ``path``'s parent before anything is opened: none may
    be a symlink or a non-directory, and the real path must stay inside the real golden dir. With
    ``create``, missing directories are made one by one (never through a link). Returns the absolute path,
    or None when a directory on the way is missing (so the file is missing too)."""
    p = Path(os.path.abspath(path))
    if root is None:
        if create:
            p.parent.mkdir(parents=True, exist_ok=True)
        return p
    r = Path(os.path.abspath(root))
    p = _inside(r, p)
    try:
        st = os.lstat(r)
    except FileNotFoundError:
        if not create:
            return None
        r.mkdir(parents=True, exist_ok=True)
        st = os.lstat(r)
    if stat.S_ISLNK(st.st_mode):
        raise _symlink_error("golden dir", r)
    if not stat.S_ISDIR(st.st_mode):
        raise GoldenPathError(f"golden dir {r} is {_kind(st.st_mode)}, not a directory: remove it")
    cur = r
    for part in p.relative_to(r).parts[:-1]:
        cur = cur / part
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            if not create:
                return None
            os.mkdir(cur)
            continue
        if stat.S_ISLNK(st.st_mode):
            raise _symlink_error("golden directory", cur)
        if not stat.S_ISDIR(st.st_mode):
            raise GoldenPathError(f"golden path {cur} is not a directory ({_kind(st.st_mode)}), but golden "
                                  f"files belong under it: remove it")
    real_root, real_parent = os.path.realpath(r), os.path.realpath(p.parent)
    if os.path.commonpath([real_root, real_parent]) != real_root:
        raise GoldenPathError(f"golden path {p} escapes the golden dir {r} (it resolves to {real_parent})")
    return p


def _check_file(p: Path) -> bool:
    """Whether a regular file exists at ``p`` (False: nothing there); anything else there is refused."""
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise _symlink_error("golden file", p)
    if not stat.S_ISREG(st.st_mode):
        kind = _kind(st.st_mode)
        fix = "remove it (rm -r)" if kind == "a directory" else "remove it"
        raise GoldenPathError(f"golden path {p} is {kind}, not a golden file: {fix}, then re-capture the golden "
                              f"with the regen command")
    return True


def _read_regular(p: Path) -> bytes:
    """The bytes of the regular file ``p``: never follows a link, never blocks on a FIFO (the file type is
    checked before opening, and again on the open descriptor, which a swap in between cannot fool)."""
    if not _check_file(p):
        raise GoldenMissingError(f"golden file not found: {p}")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(p, flags)
    except FileNotFoundError:
        raise GoldenMissingError(f"golden file not found: {p}") from None
    except OSError as e:
        raise GoldenPathError(f"golden file {p} cannot be opened as a regular file ({e})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise GoldenPathError(f"golden path {p} is {_kind(st.st_mode)}, not a golden file: remove it")
        return f.read()


# ----------------------------------------------------------------------------------------- encoding

_FP8_DTYPES = {
    name: getattr(torch, attr)
    for name, attr in (("e4nv", "float8_e4m3fn"), ("e5m2", "float8_e5m2"),
                       ("e4m3fnuz", "float8_e4m3fnuz"), ("e5m2fnuz", "float8_e5m2fnuz"))
    if hasattr(torch, attr)
}
_FP8_BY_DTYPE = {v: k for k, v in _FP8_DTYPES.items()}
_FLOATS = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32", torch.float64: "fp64"}
_INTS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)


def _dtype_name(dt: torch.dtype) -> str:
    return str(dt).removeprefix("torch.")


@dataclass
class Stored:
    """A tensor as a golden holds it: CPU, contiguous, with its kind and FP8 format resolved."""

    tensor: torch.Tensor      # original dtype (float8 stays float8), on CPU
    kind: str                 # "fp8" | "float" | "int"
    fmt: str | None           # canonical FP8 format name for kind "fp8"

    @property
    def codes(self) -> torch.Tensor:
        """FP8 codes as uint8 (kind fp8 only)."""
        t = self.tensor
        return t if t.dtype == torch.uint8 else t.view(torch.uint8)

    @property
    def short_dtype(self) -> str:
        if self.kind == "fp8":
            return self.fmt or "fp8"
        return _FLOATS.get(self.tensor.dtype, _dtype_name(self.tensor.dtype))

    def array(self) -> np.ndarray:
        t = self.tensor
        if self.kind == "fp8":
            arr = self.codes.numpy()
        elif t.dtype == torch.bfloat16:
            arr = t.view(torch.int16).numpy().view(np.uint16)
        else:
            arr = t.numpy()
        # not np.ascontiguousarray: it turns a 0-d array into shape (1,)
        return np.require(arr.astype(arr.dtype.newbyteorder("<"), copy=False), requirements="C")


def _canonical_fmt(fmt: Any) -> str:
    from harness.fp8 import get_format

    return get_format(fmt).name


def to_stored(tensor: Any, fmt: Any = None) -> Stored:
    """Validate ``tensor``/``fmt`` as :meth:`Golden.check` accepts them."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"golden tensor must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.layout != torch.strided or tensor.is_quantized or tensor.is_complex() or tensor.is_meta:
        raise TypeError(f"golden tensor must be a dense real tensor, got layout={tensor.layout} "
                        f"dtype={tensor.dtype}")
    t = tensor.detach().to("cpu").contiguous()
    if t.dtype in _FP8_BY_DTYPE:
        own = _FP8_BY_DTYPE[t.dtype]
        if fmt is not None and _canonical_fmt(fmt) != own:
            raise ValueError(f"golden fmt={fmt!r} contradicts the tensor dtype {t.dtype} (format {own})")
        return Stored(t, "fp8", own)
    if fmt is not None:
        if t.dtype != torch.uint8:
            raise ValueError(f"golden fmt={fmt!r} needs FP8 codes (uint8 or a torch float8 tensor), "
                             f"got {t.dtype}")
        return Stored(t, "fp8", _canonical_fmt(fmt))
    if t.dtype in _FLOATS:
        return Stored(t, "float", None)
    if t.dtype in _INTS:
        return Stored(t, "int", None)
    raise TypeError(f"golden tensor dtype {t.dtype} is not supported (float, FP8, integer or bool)")


def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, version=(1, 0), allow_pickle=False)
    return buf.getvalue()


def encode_golden(stored: Stored, meta: dict[str, Any]) -> bytes:
    """The file's bytes. Deterministic: stored zip entries, fixed date and attributes, sorted JSON."""
    if stored.kind == "float":
        n_nan = int(torch.isnan(stored.tensor).sum())
        if n_nan:
            raise GoldenError(
                f"golden {meta.get('name')!r}: refusing to store a float tensor with {n_nan} NaN element(s): "
                f"NaN never compares equal, so the golden could never pass"
            )
    arr = stored.array()
    meta = dict(meta)
    meta.update(format_version=FORMAT_VERSION, dtype=_dtype_name(stored.tensor.dtype), fmt=stored.fmt,
                storage=arr.dtype.str, shape=list(arr.shape))
    meta_bytes = json.dumps(meta, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED, allowZip64=False) as zf:
        for member, data in ((_TENSOR_MEMBER, _npy_bytes(arr)),
                             (_META_MEMBER, _npy_bytes(np.frombuffer(meta_bytes, dtype=np.uint8)))):
            info = zipfile.ZipInfo(member, date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_STORED
            info.create_system = 3
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return buf.getvalue()


def write_golden(path: str | os.PathLike[str], stored: Stored, meta: dict[str, Any], *,
                 root: str | os.PathLike[str] | None = None) -> bytes:
    """Atomically replace ``path`` (temp file in the same dir, then ``os.replace``): readers and parallel
    runs see the old file or the new one, never half of one. With ``root`` (the golden dir) the path must
    stay inside it with no symlink on the way; whatever stands at ``path`` must be a regular file."""
    data = encode_golden(stored, meta)
    p = _walk(Path(root) if root is not None else None, Path(path), create=True)
    assert p is not None
    _check_file(p)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return data


_MAX_META_BYTES = 1 << 20  # metadata is a few hundred bytes; anything near this is not a golden's


def _read_array(zf: zipfile.ZipFile, member: str) -> np.ndarray:
    return np.lib.format.read_array(io.BytesIO(zf.read(member)), allow_pickle=False)


# dtype -> how its array is stored (little-endian); the only dtypes a golden holds
_STORAGE: dict[torch.dtype, str] = {
    torch.float16: "<f2", torch.bfloat16: "<u2", torch.float32: "<f4", torch.float64: "<f8",
    torch.int8: "|i1", torch.int16: "<i2", torch.int32: "<i4", torch.int64: "<i8", torch.uint8: "|u1",
    torch.bool: "|b1", **{dt: "|u1" for dt in _FP8_BY_DTYPE},
}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# field -> (check, what is expected); required fields are in _REQUIRED_META
_META_FIELDS: dict[str, tuple[Any, str]] = {
    "name": (lambda v: isinstance(v, str), "a str"),
    "dtype": (lambda v: isinstance(v, str), "a str (a torch dtype name)"),
    "storage": (lambda v: isinstance(v, str), "a str (a numpy dtype string)"),
    "shape": (lambda v: isinstance(v, list) and all(_is_int(d) and d >= 0 for d in v),
              "a list of non-negative integers"),
    "arch": (lambda v: isinstance(v, str), "a str"),
    "harness_version": (lambda v: isinstance(v, str), "a str"),
    "fmt": (lambda v: v is None or isinstance(v, str), "null or an FP8 format name"),
    "op": (lambda v: v is None or isinstance(v, str), "null or a str"),
    "dtype_case": (lambda v: v is None or isinstance(v, str), "null or a str"),
    "seed": (lambda v: v is None or _is_int(v), "null or an integer"),
    "device": (lambda v: v is None or isinstance(v, str), "null or a str"),
    "test": (lambda v: v is None or isinstance(v, dict), "null or an object"),
}


def _check_meta(p: Path, meta: dict[str, Any]) -> torch.dtype:
    """Validate the metadata's fields and their agreement; returns the golden's torch dtype."""
    arch = meta.get("arch") if isinstance(meta.get("arch"), str) else None

    def bad(msg: str) -> GoldenFormatError:
        return GoldenFormatError(f"golden file {p}: {msg}; re-capture it with the regen command (a regen run on "
                                 f"the arch that captured it overwrites it)", arch=arch)

    version = meta.get("format_version")
    if not _is_int(version) or version != FORMAT_VERSION:
        raise GoldenFormatError(
            f"golden file {p} has format version {version!r}; this harness reads version {FORMAT_VERSION} "
            f"(regenerate it)", arch=arch
        )
    missing = [k for k in _REQUIRED_META if k not in meta]
    if missing:
        raise bad(f"metadata lacks {', '.join(missing)}")
    for key, (ok, what) in _META_FIELDS.items():
        if key in meta and not ok(meta[key]):
            v = repr(meta[key])
            raise bad(f"metadata field {key!r} is {v if len(v) <= 60 else v[:57] + '...'} "
                      f"({type(meta[key]).__name__}), expected {what}")
    dt = getattr(torch, meta["dtype"], None) if meta["dtype"].isidentifier() else None
    if not isinstance(dt, torch.dtype):
        raise bad(f"unknown torch dtype {meta['dtype']!r}")
    if dt not in _STORAGE:
        raise bad(f"{meta['dtype']} is not a golden dtype (float, FP8, integer or bool)")
    if meta["storage"] != _STORAGE[dt]:
        raise bad(f"storage {meta['storage']} does not hold dtype {meta['dtype']} (stored as {_STORAGE[dt]})")
    fmt = meta.get("fmt")
    if fmt is not None:
        try:
            canon = _canonical_fmt(fmt)
        except (ValueError, KeyError, TypeError) as e:
            raise bad(f"metadata field 'fmt' is {fmt!r}: unknown FP8 format ({e})") from None
        if canon != fmt:
            raise bad(f"metadata field 'fmt' is {fmt!r}, expected the canonical name {canon!r}")
    if dt in _FP8_BY_DTYPE:
        if fmt != _FP8_BY_DTYPE[dt]:
            raise bad(f"fmt {fmt!r} contradicts dtype {meta['dtype']} (format {_FP8_BY_DTYPE[dt]!r})")
    elif fmt is not None and dt != torch.uint8:
        raise bad(f"fmt {fmt!r} needs uint8 codes, but the metadata says dtype {meta['dtype']}")
    return dt


#: Metadata is flat (values at most a list or dict deep); anything nested past this is not ours.
_META_MAX_DEPTH = 16


def _json_depth(obj: Any) -> int:
    """Nesting depth of parsed JSON, without recursion (so a hostile file cannot exhaust the stack here)."""
    depth, level = 0, [obj]
    while level:
        depth += 1
        level = [v for o in level if isinstance(o, (dict, list)) for v in (o.values() if isinstance(o, dict) else o)]
    return depth - 1


def read_golden(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None
                ) -> tuple[torch.Tensor, dict[str, Any]]:
    """Load a golden: ``(tensor, metadata)``. FP8 goldens come back in their torch float8 dtype (or as
    uint8 codes when they were stored from codes). Raises :class:`GoldenMissingError`,
    :class:`GoldenPathError` (a symlink, directory or FIFO; with ``root``, a path outside the golden dir)
    or :class:`GoldenFormatError`, each naming the file and what is wrong with it."""
    checked = _walk(Path(root) if root is not None else None, Path(path), create=False)
    if checked is None:
        raise GoldenMissingError(f"golden file not found: {Path(path)}")
    p = Path(path)
    data = _read_regular(checked)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = sorted(zf.namelist())
            if names != sorted((_META_MEMBER, _TENSOR_MEMBER)):
                raise ValueError(f"members are {names}, expected {[_META_MEMBER, _TENSOR_MEMBER]}")
            size = zf.getinfo(_META_MEMBER).file_size
            if size > _MAX_META_BYTES:
                raise ValueError(f"metadata member is {size} bytes, more than {_MAX_META_BYTES}")
            bad = zf.testzip()
            if bad is not None:
                raise ValueError(f"CRC check failed for member {bad}")
            meta_arr = _read_array(zf, _META_MEMBER)
            arr = _read_array(zf, _TENSOR_MEMBER)
    except (zipfile.BadZipFile, ValueError, EOFError, OSError, KeyError) as e:
        raise GoldenFormatError(f"golden file {p} is truncated or corrupt ({type(e).__name__}: {e})") \
            from None
    try:
        if meta_arr.dtype != np.uint8 or meta_arr.ndim != 1:
            raise ValueError("meta member is not a 1-d uint8 array")
        meta = json.loads(meta_arr.tobytes().decode("utf-8"))
        if not isinstance(meta, dict):
            raise ValueError("meta is not a JSON object")
        if _json_depth(meta) > _META_MAX_DEPTH:
            raise RecursionError  # Python 3.12's parser takes 5,000 levels that 3.11's refuses: one limit here
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        what = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        raise GoldenFormatError(f"golden file {p}: unreadable metadata ({what}); re-capture it with the regen "
                                f"command") from None
    dt = _check_meta(p, meta)
    if arr.dtype.str != meta["storage"] or list(arr.shape) != meta["shape"]:
        raise GoldenFormatError(
            f"golden file {p}: array is {arr.dtype.str}{list(arr.shape)} but metadata says "
            f"{meta['storage']}{meta['shape']}; re-capture it with the regen command", arch=meta["arch"]
        )
    arr = arr.astype(arr.dtype.newbyteorder("="), copy=True)
    if dt in _FP8_BY_DTYPE:
        t = torch.from_numpy(arr).view(dt)
    elif dt == torch.bfloat16:
        t = torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    else:
        t = torch.from_numpy(arr)
    if t.dtype != dt or list(t.shape) != meta["shape"]:  # unreachable after the storage check; kept as a guard
        raise GoldenFormatError(f"golden file {p}: stored {arr.dtype} does not hold dtype {meta['dtype']}",
                                arch=meta["arch"])
    return t, meta


def _stored_from_file(t: torch.Tensor, meta: dict[str, Any]) -> Stored:
    if meta.get("fmt"):
        return Stored(t, "fp8", meta["fmt"])
    return Stored(t, "float" if t.dtype in _FLOATS else "int", None)


# ------------------------------------------------------------------------------------------ diffing

def _bits(s: Stored) -> torch.Tensor:
    t = s.tensor
    if s.kind == "fp8":
        return s.codes
    if t.dtype == torch.bool:
        return t
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.view(width)


def _same_layout(a: Stored, b: Stored) -> str | None:
    """Why ``a`` cannot be compared element-wise with ``b`` (None when it can)."""
    if a.kind != b.kind or a.fmt != b.fmt or (a.kind != "fp8" and a.tensor.dtype != b.tensor.dtype):
        what = lambda s: f"{s.fmt} codes" if s.kind == "fp8" else _dtype_name(s.tensor.dtype)  # noqa: E731
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
    n = new.tensor.numel()
    layout = _same_layout(new, old)
    if layout:
        return Diff(n, n, layout=layout)
    ne = _bits(new) != _bits(old)
    changed = int(ne.sum())
    if not changed:
        return Diff(n, 0)
    if new.kind == "fp8":
        from harness.fp8 import decode, ulp_distance

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

def ci_active(environ: Any = None) -> bool:
    """Whether ``CI`` is set to anything but an explicit false: goldens are never written there."""
    v = (environ if environ is not None else os.environ).get("CI", "")
    return v.strip().lower() not in ("", "0", "false", "no", "off")


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
    collisions: dict[str, list[str]] = field(default_factory=dict)  # nodeid -> every nodeid sharing its dir

    def rel(self, path: Path) -> str:
        return rel_path(path, self.rootdir)

    def claim(self, path: Path, nodeid: str) -> None:
        """Each golden file belongs to one test item: that is what keeps parallel writers apart."""
        rel = self.rel(path)
        owner = self.owners.setdefault(rel, nodeid)
        if owner != nodeid:
            raise GoldenError(f"golden file {rel} is checked by two tests: {owner} and {nodeid}")


def _versions() -> dict[str, Any]:
    import harness

    # Never import triton here: the kernels under test already did, and a plain golden user needs none.
    triton_v = getattr(sys.modules.get("triton"), "__version__", None)
    if triton_v is None:
        for dist in ("triton", "pytorch-triton", "pytorch-triton-rocm"):
            try:
                triton_v = importlib.metadata.version(dist)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    return {"torch_version": torch.__version__, "triton_version": triton_v,
            "numpy_version": np.__version__, "harness_version": harness.__version__}


def _device_name(arch: Any) -> str:
    if getattr(arch, "kind", None) in ("cuda", "rocm") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.cuda.current_device())
    if getattr(arch, "kind", None) == "interp":
        return "triton-interpreter"
    return "cpu"


def _shell_quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


def regen_command(selection: str) -> str:
    return f"python -m harness golden regen {_shell_quote(selection)}"


def recapture_command(rel: str, selection: str) -> str:
    """The command that replaces a golden captured on another arch with this machine's output: a regen run
    never rewrites a foreign golden, but it creates a missing one."""
    return f"rm {_shell_quote(rel)} && {regen_command(selection)}"


# ------------------------------------------------------------------------------------------ decision

MODES = ("check", "regen", "regen-all")
#: missing: no file; unreadable: a file that is corrupt, truncated or malformed; readable: a good golden;
#: refused: not a regular file inside the golden dir (symlink, directory, FIFO), never touched.
FILE_STATES = ("missing", "unreadable", "readable", "refused")
OUTCOMES = ("pass", "fail-missing", "fail-unreadable", "fail-refused", "fail-mismatch", "fail-foreign", "write",
            "write-review")


@dataclass(frozen=True)
class Decision:
    """What one ``golden.check`` does: compare (``none``; ``tolerance``: the check's rule; ``content``:
    bits, dtype, shape, format, op, dtype case), then ``if_equal`` when nothing differs (or nothing was
    compared), else ``if_differs``. ``write`` writes and passes; ``write-review`` writes and the test fails
    at its end so the new golden is looked at; ``fail-foreign``: differs from a golden of another arch,
    which no run here rewrites."""

    compare: str
    if_equal: str
    if_differs: str


def decide(mode: str, state: str, same_arch: bool | None) -> Decision:
    """The whole golden workflow as a pure function of the run's mode, the file's state and whether the
    file was captured on this arch (None: unknown, the file names no arch).

    A golden of another arch (an H200's, on a CPU box) is compared and never replaced: regenerating here
    would swap the hardware's output for this lane's without anyone noticing. Deleting it first makes it
    missing, which a regen run creates (:func:`recapture_command`)."""
    if mode not in MODES:
        raise ValueError(f"decide: mode must be one of {MODES}, got {mode!r}")
    if state not in FILE_STATES:
        raise ValueError(f"decide: state must be one of {FILE_STATES}, got {state!r}")
    if not (same_arch is None or same_arch is True or same_arch is False):  # 1 == True: compare identity
        raise ValueError(f"decide: same_arch must be True, False or None, got {same_arch!r}")
    if state in ("missing", "refused") and same_arch is not None:
        raise ValueError(f"decide: a {state} file names no arch, so same_arch must be None")
    if state == "readable" and same_arch is None:
        raise ValueError("decide: a readable golden names its arch, so same_arch must be True or False")
    if state == "refused":
        return Decision("none", "fail-refused", "fail-refused")
    if mode == "check":
        if state == "readable":
            return Decision("tolerance", "pass", "fail-mismatch")
        return Decision("none", f"fail-{state}", f"fail-{state}")
    if state == "readable":
        if same_arch is False:
            return Decision("tolerance", "pass", "fail-foreign")
        if mode == "regen":
            return Decision("tolerance", "pass", "write-review")
        return Decision("content", "pass", "write")
    if same_arch is False:  # an unreadable golden of another arch: repaired only there
        return Decision("none", "fail-foreign", "fail-foreign")
    write = "write" if mode == "regen-all" else "write-review"
    return Decision("none", write, write)


def _current_arch(config: Any) -> Any:
    from harness.arch import current_arch

    return current_arch(config)


# ------------------------------------------------------------------------------------------ fixture

class Golden:
    """The ``golden`` fixture: compare tensors of one test item against its golden files."""

    def __init__(self, item: Any, state: GoldenState) -> None:
        self._item = item
        self._state = state
        self._stem, self._test, self._param = item_dir_parts(item)
        self._names: set[str] = set()
        self.regenerated: list[str] = []   # messages of checks that rewrote a golden under --golden-regen

    @property
    def dir(self) -> Path:
        """This test item's golden directory."""
        return _inside(self._state.root, self._state.root / self._stem / self._test / self._param)

    def path(self, name: str) -> Path:
        """Where the golden ``name`` of this test lives."""
        return _inside(self._state.root, self.dir / f"{validate_name(name)}.npz")

    # -- public API -------------------------------------------------------------------------------

    def check(self, name: str, tensor: torch.Tensor, *, fmt: Any = None, tol: Any = None) -> None:
        """Compare ``tensor`` with the golden ``name`` of this test (see the module docstring for rules)."""
        __tracebackhide__ = True
        validate_name(name)
        if tol is not None:
            from harness.tolerances import Tolerance

            if not isinstance(tol, Tolerance):
                raise TypeError(f"golden.check: tol must be a harness.tolerances.Tolerance, "
                                f"got {type(tol).__name__}")
        obtained = to_stored(tensor, fmt)
        if tol is not None and obtained.kind == "int":
            raise ValueError(f"golden.check: tol does not apply to {obtained.tensor.dtype} tensors, which "
                             f"always compare exactly")
        if name in self._names:
            raise GoldenError(f"golden {name!r} is checked twice in {self._item.nodeid}; use distinct names")
        self._names.add(name)
        path = self.path(name)
        rel = self._state.rel(path)
        self._state.claim(path, self._item.nodeid)
        self._state.used.add(rel)
        self._state.checked += 1
        state, old, meta, err = self._read(path)
        gen = meta.get("arch") if old is not None else getattr(err, "arch", None)
        here = getattr(_current_arch(self._item.config), "name", None)
        d = decide(self._state.mode, state, None if gen is None else gen == here)
        failure = None
        if d.compare == "tolerance":
            failure = self._compare(name, rel, obtained, old, meta, tol)
            differs = failure is not None
        else:
            differs = d.compare == "content" and self._content_differs(obtained, old, meta)
        self._act(d.if_differs if differs else d.if_equal, state, name, path, rel, obtained, old, err, failure,
                  gen, here)

    def _read(self, path: Path) -> tuple[str, Stored | None, dict[str, Any], GoldenError | None]:
        """(file state, stored golden, metadata, error) of one golden file; the state is decide()'s."""
        try:
            t, meta = read_golden(path, root=self._state.root)
        except GoldenMissingError:
            return "missing", None, {}, None
        except GoldenPathError as e:
            return "refused", None, {}, e
        except GoldenFormatError as e:
            return "unreadable", None, {}, e
        return "readable", _stored_from_file(t, meta), meta, None

    def _act(self, outcome: str, state: str, name: str, path: Path, rel: str, obtained: Stored,
             old: Stored | None, err: GoldenError | None, failure: str | None, gen: str | None,
             here: str | None) -> None:
        """Carry out one of decide()'s outcomes."""
        __tracebackhide__ = True
        nodeid = self._item.nodeid
        if outcome == "pass":
            return
        if outcome == "fail-missing":
            pytest.fail(self._missing_message(name, rel), pytrace=False)
        if outcome == "fail-refused":
            pytest.fail(str(err), pytrace=False)
        foreign = (f"{rel} was captured on {gen} and this run is {here}; a run here never rewrites it.\n"
                   f"To update it, run on {gen}:\n    {regen_command(nodeid)}\n"
                   f"or, to replace it with this arch's output on purpose:\n    {recapture_command(rel, nodeid)}")
        if outcome == "fail-unreadable":
            advice = f"To rewrite it: {regen_command(nodeid)}" if gen in (None, here) else foreign
            pytest.fail(f"{err}\n{advice}", pytrace=False)
        if outcome == "fail-mismatch":
            advice = (f"To update it: {regen_command(nodeid)}  (or pytest --golden-regen)" if gen == here
                      else f"{foreign}\n(or, if the difference is expected across arches, widen the tolerance "
                           f"row named above)")
            raise AssertionError(f"{failure}\n{advice}")
        if outcome == "fail-foreign":
            raise AssertionError(f"{failure or err}\nNot rewritten: {foreign}")
        problem = "missing" if state == "missing" else f"unreadable ({err})" if state == "unreadable" else ""
        action = "created" if state == "missing" else "rewritten"
        if outcome == "write":
            self._write(path, rel, name, obtained, old, action, problem or "regen-all")
            return
        if outcome == "write-review":
            change = self._write(path, rel, name, obtained, old, action, problem or "mismatch")
            self.regenerated.append(
                f"golden {name!r} regenerated: {rel} ({change['summary']}; was {problem})" if problem else
                f"golden {name!r} regenerated: {rel} ({change['summary']})\nprevious comparison:\n{failure}")
            return
        raise AssertionError(f"golden: unknown outcome {outcome!r}")  # decide() returned something new

    def load(self, name: str, *, test: str | None = None, param: str | None = None
             ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Read a golden, by default this test's own; ``test`` names another test (``test_fn``, or
        ``module_stem::test_fn`` in another module) whose unparametrized golden (``param=None``) or the one
        of param id ``param`` is read. Returns ``(tensor, metadata)``; missing files raise
        :class:`GoldenMissingError` with the command that creates them."""
        validate_name(name)
        stem, tname, pid = self._stem, self._test, self._param
        if test is not None:
            if not isinstance(test, str):
                raise TypeError(f"golden.load: test must be a str, got {type(test).__name__}")
            parts = test.split("::")
            if len(parts) > 2 or not all(_TEST_RE.fullmatch(x) and ".." not in x for x in parts):
                raise ValueError(f"golden.load: test {test!r} must be 'test_name' or "
                                 f"'module_stem::test_name' (letters, digits, '_', '.', '-'; no path "
                                 f"separators or '..')")
            stem, tname = (parts[0], parts[1]) if len(parts) == 2 else (stem, parts[0])
            pid = "_"
        if param is not None:
            if not isinstance(param, str):
                raise TypeError(f"golden.load: param must be a str, got {type(param).__name__}")
            if any(c in param for c in ("/", "\\", "\x00")) or param.startswith("."):
                raise ValueError(f"golden.load: param {param!r} must be a param id (no '/', '\\', NUL or "
                                 f"leading '.')")
            pid = sanitize_component(param)
        path = _inside(self._state.root, self._state.root / stem / tname / pid / f"{name}.npz")
        rel = self._state.rel(path)
        self._state.used.add(rel)
        try:
            return read_golden(path, root=self._state.root)
        except GoldenMissingError:
            if test is None:
                how = regen_command(self._item.nodeid)
            else:
                how = f"python -m harness golden regen -k {_shell_quote(tname.split('.')[-1])}"
            raise GoldenMissingError(f"golden file not found: {rel}\nCreate it with: {how}") from None

    # -- internals --------------------------------------------------------------------------------

    def _missing_message(self, name: str, rel: str) -> str:
        lines = [f"golden {name!r} not found: {rel}"]
        if ci_active():
            lines.append("Goldens are never created in CI (CI is set); create it locally and commit it:")
        else:
            lines.append("Create it with:")
        lines.append(f"    {regen_command(self._item.nodeid)}")
        return "\n".join(lines)

    def _op(self) -> str:
        m = self._item.get_closest_marker("harness_op")
        return str(m.args[0]) if m is not None and m.args else "default"

    def _dtype_key(self, obtained: Stored) -> str:
        case = getattr(self._item, "funcargs", {}).get("dtype_case")
        case_id = getattr(case, "id", None)
        return case_id if isinstance(case_id, str) else obtained.short_dtype

    def _meta(self, name: str, obtained: Stored) -> dict[str, Any]:
        arch = _current_arch(self._item.config)
        funcargs = getattr(self._item, "funcargs", {})
        seed = funcargs.get("seed")
        if seed is None and isinstance(funcargs.get("rng"), torch.Generator):
            seed = funcargs["rng"].initial_seed()
        case = getattr(funcargs.get("dtype_case"), "id", None)
        m = self._item.get_closest_marker("harness_op")
        return {
            "name": name,
            "test": {"module": self._stem, "test": self._test, "param": self._param,
                     "nodeid": self._item.nodeid},
            "op": str(m.args[0]) if m is not None and m.args else None,
            "dtype_case": case if isinstance(case, str) else None,
            "seed": int(seed) if isinstance(seed, int) else None,
            "arch": getattr(arch, "name", str(arch)),
            "device": _device_name(arch),
            **_versions(),
        }

    def _content_differs(self, obtained: Stored, old: Stored, old_meta: dict[str, Any]) -> bool:
        if _same_layout(obtained, old) or bool((_bits(obtained) != _bits(old)).any()):
            return True
        new_meta = self._meta(str(old_meta.get("name")), obtained)
        return any(new_meta.get(k) != old_meta.get(k) for k in ("op", "dtype_case"))

    def _write(self, path: Path, rel: str, name: str, obtained: Stored, old: Stored | None, action: str,
               reason: str) -> dict[str, Any]:
        if ci_active():
            raise GoldenError(f"refusing to write golden {rel}: CI is set (goldens are captured locally)")
        write_golden(path, obtained, self._meta(name, obtained), root=self._state.root)
        d = diff(obtained, old) if old is not None else None
        n = obtained.tensor.numel()
        change = {
            "path": rel, "nodeid": self._item.nodeid, "name": name, "action": action, "reason": reason,
            "dtype": _dtype_name(obtained.tensor.dtype), "fmt": obtained.fmt,
            "shape": list(obtained.tensor.shape), "elements": n,
            "changed": n if d is None else d.changed,
            "worst_ulp": None if d is None else d.worst_ulp,
            "worst_abs": None if d is None or d.worst_abs is None or not math.isfinite(d.worst_abs)
            else d.worst_abs,
            "layout": None if d is None else d.layout,
            "summary": f"new, {n} elements" if d is None else d.describe(),
        }
        self._state.changes.append(change)
        return change

    def _tolerance(self, obtained: Stored, meta: dict[str, Any], tol: Any, arch: Any
                   ) -> tuple[Any, bool, str]:
        """(tolerance, exact?, why) for this comparison."""
        from harness.tolerances import Tolerance, lookup

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
                 tol: Any) -> str | None:
        """None when ``obtained`` matches the golden, else the full failure message (``harness.report``)."""
        from harness import report

        arch = _current_arch(self._item.config)
        m = report.GoldenMismatch(name=name, path=rel, generated_on=meta.get("arch"), device=meta.get("device"),
                                  torch_version=meta.get("torch_version"),
                                  triton_version=meta.get("triton_version"), running_on=getattr(arch, "name", arch),
                                  n=obtained.tensor.numel())
        layout = _same_layout(obtained, old)
        if layout:
            m.layout = layout
            return report.message(m)
        same_bits = not bool((_bits(obtained) != _bits(old)).any())
        op, dtype = f"golden/{self._op()}", self._dtype_key(obtained)
        if obtained.kind == "int":
            from harness import summary
            from harness.tolerances import Tolerance

            summary.record(op=op, dtype=dtype, arch=arch, n=obtained.tensor.numel(),
                           tol=Tolerance(key="golden/exact/integer"),
                           passed=same_bits, worst_abs=_int_worst(obtained, old))
            if same_bits:
                return None
            ne = obtained.tensor != old.tensor
            m.int_k = int(ne.sum())
            m.int_rows = [(tuple(at), obtained.tensor[tuple(at)].item(), old.tensor[tuple(at)].item())
                          for at in ne.nonzero()[:report.INT_ROWS].tolist()]
            return report.message(m)
        t, exact, why = self._tolerance(obtained, meta, tol, arch)
        m.tol, m.why = t, why
        # Always run the comparison, even when the bits are equal: it records the observation that the
        # session table (harness.summary) shows per op x dtype x arch.
        from harness import compare

        if obtained.kind == "fp8":
            # nan_equal: a golden records codes, and a NaN code it recorded must face a NaN code
            m.mismatch = compare.check_fp8(obtained.codes, old.codes, obtained.fmt, t, op=op, dtype=dtype,
                                           nan_equal=True)
        else:
            m.mismatch = compare.check_close(obtained.tensor, old.tensor, t, op=op, dtype=dtype)
        if m.mismatch is None and exact and not same_bits:
            m.bits_differ = int((_bits(obtained) != _bits(old)).sum())
        if m.mismatch is None and not m.bits_differ:
            return None
        return report.message(m)


def _int_worst(a: Stored, b: Stored) -> float | None:
    if a.tensor.numel() == 0:
        return None
    if a.tensor.dtype == torch.bool:
        return float((a.tensor != b.tensor).any())
    return float((a.tensor.to(torch.float64) - b.tensor.to(torch.float64)).abs().max())
