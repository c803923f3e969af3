"""Golden files on disk: names and paths, safe reads and writes, and the ``.npz`` format.

Why one module: a golden path is built from user input (a golden name, param ids) and is written by
regen runs, so everything that touches the file system sits together, where the rules can be checked in
one read: a name is a plain file stem or it is rejected; a derived path part is sanitized; a golden is read
and written only as a regular file inside the golden dir. File types are checked with ``lstat`` before
opening, and the open itself uses ``O_NOFOLLOW | O_NONBLOCK``, so a symlink is never followed and a FIFO
never blocks a run (:class:`GoldenPathError`, in every mode).

File layout: ``<golden_dir>/<module stem>/<test name>/<param id or "_">/<name>.npz``; ``test name`` has no
parameters (``Class.method`` inside a class). The file is a plain ``.npz`` (``np.load(...,
allow_pickle=False)`` reads it) with two members: ``tensor`` (the values; bf16 as its uint16 bits, FP8 as
uint8 codes) and ``meta`` (UTF-8 JSON as a uint8 array). The zip is written by hand, each member
deflated at one fixed level (:data:`COMPRESS_LEVEL`) with fixed dates and attributes, so the same tensor gives
the same bytes wherever the same zlib runs (the repository's goldens have a size budget; stored goldens
took 13 MB, deflated 6 MB). The reader takes stored (the layout before 2026-12-04) and deflated members.
The loader trusts nothing in the file: the compression method, each member's declared size (which must be
exactly what its npy header and shape need, checked before anything is inflated, so a small file cannot
make a run inflate gigabytes), each metadata field's type, the dtype/storage/format agreement and the
array's shape are checked, and any problem is a :class:`GoldenFormatError` naming the file.
:func:`repack` re-encodes a golden in the current layout and proves the decoded arrays and metadata
unchanged before replacing it (``python -m harness golden repack``).
Metadata (JSON, sorted keys, no timestamps): format_version, name, test (module/test/param/nodeid), op,
dtype_case, dtype, fmt, storage, shape, seed, arch, device, torch/triton/numpy/harness versions. Float
goldens never hold NaN (refused at write, since NaN never compares equal).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.dtypes import FLOAT_DTYPES, short_name
from harness.fp8 import FORMAT_OF_DTYPE, get_format
from harness.golden.decide import DEFAULT_MAX_BYTES, ENV_MAX_BYTES, max_bytes

__all__ = [
    "COMPRESS_LEVEL",
    "DEFAULT_MAX_BYTES",
    "ENV_MAX_BYTES",
    "FORMAT_VERSION",
    "GoldenError",
    "GoldenFormatError",
    "GoldenMissingError",
    "GoldenPathError",
    "Repacked",
    "Stored",
    "dtype_name",
    "decode_golden",
    "encode_golden",
    "inside",
    "item_dir_parts",
    "max_bytes",
    "param_component",
    "read_golden",
    "read_stored",
    "repack",
    "rel_path",
    "sanitize_component",
    "split_test_ref",
    "to_stored",
    "validate_name",
    "write_golden",
]

#: Bumped whenever the file layout changes; the loader refuses any other version.
FORMAT_VERSION = 1

_TENSOR_MEMBER = "tensor.npy"
_META_MEMBER = "meta.npy"
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest date zip can store: no timestamps in goldens
#: zlib level of every member. Fixed, because the level changes the bytes; 9 because goldens are written
#: rarely and read often, and inflating costs the same at any level.
COMPRESS_LEVEL = 9
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
    import pytest  # an item exists only in a pytest run

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


def split_test_ref(test: Any, stem: str) -> tuple[str, str]:
    """(module stem, test name) of ``golden.load(test=...)``: ``test_fn`` (in module ``stem``) or
    ``module_stem::test_fn``; anything that could leave the golden dir is rejected."""
    if not isinstance(test, str):
        raise TypeError(f"golden.load: test must be a str, got {type(test).__name__}")
    parts = test.split("::")
    if len(parts) > 2 or not all(_TEST_RE.fullmatch(x) and ".." not in x for x in parts):
        raise ValueError(f"golden.load: test {test!r} must be 'test_name' or "
                         f"'module_stem::test_name' (letters, digits, '_', '.', '-'; no path "
                         f"separators or '..')")
    return (parts[0], parts[1]) if len(parts) == 2 else (stem, parts[0])


def param_component(param: Any) -> str:
    """The directory of ``golden.load(param=...)``: a param id as the test's own goldens name it."""
    if not isinstance(param, str):
        raise TypeError(f"golden.load: param must be a str, got {type(param).__name__}")
    if any(c in param for c in ("/", "\\", "\x00")) or param.startswith("."):
        raise ValueError(f"golden.load: param {param!r} must be a param id (no '/', '\\', NUL or "
                         f"leading '.')")
    return sanitize_component(param)


def rel_path(path: str | os.PathLike[str], rootdir: str | os.PathLike[str]) -> str:
    """``path`` relative to ``rootdir`` in posix form (how goldens are named in reports), else absolute."""
    p = Path(os.path.abspath(path))
    try:
        return p.relative_to(Path(os.path.abspath(rootdir))).as_posix()
    except ValueError:
        return p.as_posix()


def inside(root: Path, path: Path) -> Path:
    """``path`` made absolute; a :class:`GoldenPathError` unless it lies strictly inside ``root``."""
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
    p = inside(r, p)
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
        cap = max_bytes()
        if st.st_size > cap:
            raise _too_big(f"golden file {p}", st.st_size, cap)
        return f.read(cap + 1)


# ----------------------------------------------------------------------------------------- encoding

_INTS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)


def dtype_name(dt: torch.dtype) -> str:
    """``float32`` for ``torch.float32``: how metadata and reports name a dtype."""
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
        return short_name(self.tensor.dtype) or dtype_name(self.tensor.dtype)

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


def to_stored(tensor: Any, fmt: Any = None) -> Stored:
    """Validate ``tensor``/``fmt`` as :meth:`Golden.check` accepts them."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"golden tensor must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.layout != torch.strided or tensor.is_quantized or tensor.is_complex() or tensor.is_meta:
        raise TypeError(f"golden tensor must be a dense real tensor, got layout={tensor.layout} "
                        f"dtype={tensor.dtype}")
    t = tensor.detach().to("cpu").contiguous()
    if t.dtype in FORMAT_OF_DTYPE:
        own = FORMAT_OF_DTYPE[t.dtype].name
        if fmt is not None and get_format(fmt).name != own:
            raise ValueError(f"golden fmt={fmt!r} contradicts the tensor dtype {t.dtype} (format {own})")
        return Stored(t, "fp8", own)
    if fmt is not None:
        if t.dtype != torch.uint8:
            raise ValueError(f"golden fmt={fmt!r} needs FP8 codes (uint8 or a torch float8 tensor), "
                             f"got {t.dtype}")
        return Stored(t, "fp8", get_format(fmt).name)
    if t.dtype in FLOAT_DTYPES.values():
        return Stored(t, "float", None)
    if t.dtype in _INTS:
        return Stored(t, "int", None)
    raise TypeError(f"golden tensor dtype {t.dtype} is not supported (float, FP8, integer or bool)")


def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, version=(1, 0), allow_pickle=False)
    return buf.getvalue()


def encode_golden(stored: Stored, meta: dict[str, Any]) -> bytes:
    """The file's bytes. Deterministic: deflated members at :data:`COMPRESS_LEVEL`, fixed date and
    attributes, sorted JSON."""
    if stored.kind == "float":
        n_nan = int(torch.isnan(stored.tensor).sum())
        if n_nan:
            raise GoldenError(
                f"golden {meta.get('name')!r}: refusing to store a float tensor with {n_nan} NaN element(s): "
                f"NaN never compares equal, so the golden could never pass"
            )
    arr = stored.array()
    meta = dict(meta)
    meta.update(format_version=FORMAT_VERSION, dtype=dtype_name(stored.tensor.dtype), fmt=stored.fmt,
                storage=arr.dtype.str, shape=list(arr.shape))
    meta_bytes = json.dumps(meta, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    return _zip_members(((_TENSOR_MEMBER, _npy_bytes(arr)),
                         (_META_MEMBER, _npy_bytes(np.frombuffer(meta_bytes, dtype=np.uint8)))))


def _zip_members(members: Any) -> bytes:
    """A zip of ``(name, payload)`` members in the golden layout: deflated at the fixed level, fixed date,
    mode 0644, no zip64 (a golden is far below 4 GiB)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=False) as zf:
        for member, data in members:
            info = zipfile.ZipInfo(member, date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            info.external_attr = 0o644 << 16
            zf.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=COMPRESS_LEVEL)
    return buf.getvalue()


def _replace_file(p: Path, data: bytes) -> None:
    """Atomically put ``data`` at ``p`` (temp file in the same dir, fsync, then ``os.replace``)."""
    # the pid in the name lets the next run tell a write killed mid-way from one in progress
    # (harness.golden.unused.leftover_temps)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.{os.getpid()}.", suffix=".tmp")
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


def write_golden(path: str | os.PathLike[str], stored: Stored, meta: dict[str, Any], *,
                 root: str | os.PathLike[str] | None = None) -> bytes:
    """Atomically replace ``path`` (temp file in the same dir, then ``os.replace``): readers and parallel
    runs see the old file or the new one, never half of one. With ``root`` (the golden dir) the path must
    stay inside it with no symlink on the way; whatever stands at ``path`` must be a regular file."""
    data = encode_golden(stored, meta)
    cap = max_bytes()
    if stored.array().nbytes > cap or len(data) > cap:
        raise GoldenError(f"golden {meta.get('name')!r}: refusing to store {stored.array().nbytes:,} bytes, more "
                          f"than the {cap:,}-byte cap a golden is read back with (set {ENV_MAX_BYTES} to raise it)")
    p = _walk(Path(root) if root is not None else None, Path(path), create=True)
    assert p is not None
    _check_file(p)
    _replace_file(p, data)
    return data


_MAX_META_BYTES = 1 << 20  # metadata is a few hundred bytes; anything near this is not a golden's

def _too_big(what: str, size: int, cap: int) -> GoldenFormatError:
    return GoldenFormatError(f"{what} takes {size:,} bytes, more than the {cap:,}-byte cap of a golden (set "
                             f"{ENV_MAX_BYTES} to read bigger ones); not read")


#: The most an npy header may take (numpy's own reader refuses headers past 10,000 bytes by default).
_MAX_NPY_HEADER = 1 << 16
#: Deflate's largest expansion: one 258-byte match per 2 bits at best, about 1032:1 (RFC 1951's length
#: codes). A member declaring more than this many bytes per compressed byte cannot be honest.
_MAX_DEFLATE_RATIO = 1032
_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}


def _npy_prefix(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[bytes, int]:
    """(the npy header bytes, the member's size as that header's shape and dtype need it). Reads only the
    header: the body is inflated only once its declared size has been checked against this."""
    with zf.open(info) as f:
        head = f.read(10)
        if len(head) < 10 or head[:6] != b"\x93NUMPY":
            raise ValueError(f"member {info.filename} is not an npy array")
        major = head[6]
        if major == 1:
            hlen, fixed = int.from_bytes(head[8:10], "little"), 10
        elif major in (2, 3):
            head += f.read(2)
            hlen, fixed = int.from_bytes(head[8:12], "little"), 12
        else:
            raise ValueError(f"member {info.filename} has npy version {major}, expected 1, 2 or 3")
        if hlen > _MAX_NPY_HEADER:
            raise ValueError(f"member {info.filename} declares a {hlen}-byte npy header, more than "
                             f"{_MAX_NPY_HEADER}")
        prefix = head + f.read(hlen)
    if len(prefix) != fixed + hlen:
        raise ValueError(f"member {info.filename} ends inside its npy header")
    fp = io.BytesIO(prefix)
    version = np.lib.format.read_magic(fp)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read_header(fp)
    if dtype.hasobject:
        raise ValueError(f"member {info.filename} holds Python objects; goldens hold numbers only")
    count = 1
    for d in shape:
        count *= int(d)
    return prefix, len(prefix) + count * dtype.itemsize


def _read_array(zf: zipfile.ZipFile, member: str) -> np.ndarray:
    """One npy member, size-guarded: only stored or deflated; the declared uncompressed size must be the one
    its npy header implies (:func:`_members` has checked it against deflate's ratio and the cap); only then is
    it read (zipfile then stops at the declared size and checks the CRC)."""
    info = zf.getinfo(member)
    if info.compress_type not in _METHODS:
        raise ValueError(f"member {member} uses zip compression method {info.compress_type}, expected stored (0) "
                         f"or deflated (8)")
    if info.flag_bits & 0x1:
        raise ValueError(f"member {member} is encrypted")
    if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
        raise ValueError(f"stored member {member} declares {info.file_size} bytes but holds {info.compress_size}")
    _, expected = _npy_prefix(zf, info)
    if info.file_size != expected:
        raise ValueError(f"member {member} declares {info.file_size} uncompressed bytes, but its npy header "
                         f"needs {expected}")
    data = zf.read(info)
    if len(data) != expected:
        raise ValueError(f"member {member} inflates to {len(data)} bytes, expected {expected}")
    return np.lib.format.read_array(io.BytesIO(data), allow_pickle=False)


# dtype -> how its array is stored (little-endian); the only dtypes a golden holds
_STORAGE: dict[torch.dtype, str] = {
    torch.float16: "<f2", torch.bfloat16: "<u2", torch.float32: "<f4", torch.float64: "<f8",
    torch.int8: "|i1", torch.int16: "<i2", torch.int32: "<i4", torch.int64: "<i8", torch.uint8: "|u1",
    torch.bool: "|b1", **{dt: "|u1" for dt in FORMAT_OF_DTYPE},
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
            canon = get_format(fmt).name
        except (ValueError, KeyError, TypeError) as e:
            raise bad(f"metadata field 'fmt' is {fmt!r}: unknown FP8 format ({e})") from None
        if canon != fmt:
            raise bad(f"metadata field 'fmt' is {fmt!r}, expected the canonical name {canon!r}")
    if dt in FORMAT_OF_DTYPE:
        if fmt != FORMAT_OF_DTYPE[dt].name:
            raise bad(f"fmt {fmt!r} contradicts dtype {meta['dtype']} (format {FORMAT_OF_DTYPE[dt].name!r})")
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
    return decode_golden(_read_regular(checked), Path(path))


def _members(data: bytes, p: Path) -> tuple[np.ndarray, np.ndarray]:
    """(meta array, tensor array) of a golden's bytes, every member size-guarded; GoldenFormatError else."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = sorted(zf.namelist())
            if names != sorted((_META_MEMBER, _TENSOR_MEMBER)):
                raise ValueError(f"members are {names}, expected {[_META_MEMBER, _TENSOR_MEMBER]}")
            size = zf.getinfo(_META_MEMBER).file_size
            if size > _MAX_META_BYTES:
                raise ValueError(f"metadata member is {size} bytes, more than {_MAX_META_BYTES}")
            cap = max_bytes()
            for info in zf.infolist():
                if info.file_size > _MAX_DEFLATE_RATIO * info.compress_size + 64:
                    raise ValueError(f"member {info.filename} declares {info.file_size} bytes from "
                                     f"{info.compress_size} compressed bytes, past deflate's 1032:1 limit (a zip "
                                     f"bomb, or a corrupt size)")
                if info.file_size > cap:
                    raise _too_big(f"golden file {p}: member {info.filename}", info.file_size, cap)
            total = sum(info.file_size for info in zf.infolist())
            if total > cap:
                raise _too_big(f"golden file {p} (its members inflated)", total, cap)
            return _read_array(zf, _META_MEMBER), _read_array(zf, _TENSOR_MEMBER)
    except GoldenFormatError:
        raise
    except (zipfile.BadZipFile, zlib.error, ValueError, EOFError, OSError, KeyError, SyntaxError) as e:
        raise GoldenFormatError(f"golden file {p} is truncated or corrupt ({type(e).__name__}: {e})") \
            from None


def decode_golden(data: bytes, path: str | os.PathLike[str] = "<bytes>") -> tuple[torch.Tensor, dict[str, Any]]:
    """:func:`read_golden` on a file's bytes (``path`` only names it in errors)."""
    p = Path(path)
    meta_arr, arr = _members(data, p)
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
    if dt in FORMAT_OF_DTYPE:
        t = torch.from_numpy(arr).view(dt)
    elif dt == torch.bfloat16:
        t = torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    else:
        t = torch.from_numpy(arr)
    if t.dtype != dt or list(t.shape) != meta["shape"]:  # unreachable after the storage check; kept as a guard
        raise GoldenFormatError(f"golden file {p}: stored {arr.dtype} does not hold dtype {meta['dtype']}",
                                arch=meta["arch"])
    return t, meta


def read_stored(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None
                ) -> tuple[Stored, dict[str, Any]]:
    """:func:`read_golden` as a :class:`Stored` (what a check compares with) and the metadata."""
    t, meta = read_golden(path, root=root)
    if meta.get("fmt"):
        return Stored(t, "fp8", meta["fmt"]), meta
    return Stored(t, "float" if t.dtype in FLOAT_DTYPES.values() else "int", None), meta


@dataclass(frozen=True)
class Repacked:
    """What :func:`repack` did to one file: ``action`` is ``"repacked"`` or ``"unchanged"`` (already in the
    current layout, not rewritten); sizes in bytes."""

    path: Path
    action: str
    old_size: int
    new_size: int


def _same(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> str | None:
    """None when two decoded member pairs (meta, tensor) hold the same metadata and the same array bits,
    else what differs."""
    if json.loads(a[0].tobytes()) != json.loads(b[0].tobytes()):
        return "the metadata"
    x, y = a[1], b[1]
    if x.dtype.str != y.dtype.str or x.shape != y.shape:
        return f"the array's type ({x.dtype.str}{list(x.shape)} became {y.dtype.str}{list(y.shape)})"
    if x.tobytes() != y.tobytes():
        bits = [np.ascontiguousarray(v).reshape(-1).view(np.uint8).reshape(v.size, v.dtype.itemsize) for v in (x, y)]
        return f"{int((bits[0] != bits[1]).any(axis=1).sum())} of {x.size} array elements"
    return None


def repack(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> Repacked:
    """Re-encode one golden in the current layout (deflated members), without changing an array bit or a
    metadata field: the file is read and validated as a run reads it, re-encoded, and the new bytes decoded
    again; only when their metadata and array bits equal the old file's is the file replaced (atomically).
    A file that cannot be read, re-encoded or verified is left as it is: :class:`GoldenError` says why."""
    checked = _walk(Path(root) if root is not None else None, Path(path), create=False)
    if checked is None:
        raise GoldenMissingError(f"golden file not found: {Path(path)}")
    old = _read_regular(checked)
    t, meta = decode_golden(old, checked)
    stored = Stored(t, "fp8", meta["fmt"]) if meta.get("fmt") else \
        Stored(t, "float" if t.dtype in FLOAT_DTYPES.values() else "int", None)
    try:
        new = encode_golden(stored, meta)
    except GoldenError as e:
        raise GoldenError(f"golden file {checked} not repacked: it cannot be re-encoded ({e})") from None
    if new == old:
        return Repacked(checked, "unchanged", len(old), len(new))
    try:
        decode_golden(new, checked)
        differs = _same(_members(old, checked), _members(new, checked))
    except GoldenFormatError as e:
        differs = f"the new bytes do not read back ({e})"
    if differs is not None:
        raise GoldenError(f"golden file {checked} not repacked: re-encoding it would change {differs}; it is left "
                          f"as it is (re-capture it with the regen command if it is stale)")
    _replace_file(checked, new)
    return Repacked(checked, "repacked", len(old), len(new))
