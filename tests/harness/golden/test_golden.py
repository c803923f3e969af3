"""The golden file format and path rules, directly (the pytest workflow is in test_golden_workflow.py)."""

from __future__ import annotations

import io
import json
import re
import zipfile

import numpy as np
import pytest
import torch

from harness.compare.checks import check_close
from harness.compare.message import format_mismatch
from harness.golden.files import (
    FORMAT_VERSION,
    GoldenError,
    GoldenFormatError,
    GoldenMissingError,
    encode_golden,
    read_golden,
    sanitize_component,
    to_stored,
    validate_name,
    write_golden,
)
from harness.golden.fixture import diff
from harness.golden.message import INT_ROWS, GoldenMismatch, format_golden

pytestmark = pytest.mark.lane_independent  # the same on every lane: the GPU lane skips it


@pytest.fixture(autouse=True)
def _outside_ci(monkeypatch):
    """These tests drive the regen workflow itself, which refuses to run with CI set; tests of that
    refusal set CI again explicitly."""
    monkeypatch.delenv("CI", raising=False)

META = {"name": "out", "arch": "interp", "harness_version": "test", "op": None}


def _bits(t: torch.Tensor) -> torch.Tensor:
    if t.dtype == torch.bool:
        return t
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def _tensors() -> dict[str, tuple[torch.Tensor, str | None]]:
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3, 7, generator=g) * 100
    codes = torch.randint(0, 256, (2, 9), generator=g, dtype=torch.int32).to(torch.uint8)
    return {
        "fp16": (x.half(), None),
        "bf16": (x.bfloat16(), None),
        "fp32": (x, None),
        "fp64": (x.double(), None),
        "fp32-inf": (torch.tensor([float("inf"), -float("inf"), -0.0, 0.0]), None),
        "fp32-0d": (torch.tensor(1.5), None),
        "fp32-empty": (torch.empty(0, 4), None),
        "e4nv": (codes.view(torch.float8_e4m3fn), None),
        "e5m2": (codes.view(torch.float8_e5m2), None),
        "codes-e4b15": (codes, "e4b15"),
        "int32": (torch.arange(-5, 6, dtype=torch.int32), None),
        "int64": (torch.tensor([2**62, -(2**62)]), None),
        "bool": (torch.tensor([[True, False], [False, True]]), None),
        "noncontig": (x.t(), None),
    }


CASES = _tensors()


@pytest.mark.parametrize("case", list(CASES))
def test_roundtrip_is_bit_exact(tmp_path, case):
    t, fmt = CASES[case]
    p = tmp_path / "g.npz"
    write_golden(p, to_stored(t, fmt), META)
    back, meta = read_golden(p)
    assert back.dtype == t.dtype and back.shape == t.shape
    assert torch.equal(_bits(back), _bits(t.contiguous()))
    assert meta["format_version"] == FORMAT_VERSION
    assert meta["fmt"] == (fmt if fmt else ({"e4nv": "e4nv", "e5m2": "e5m2"}.get(case)))


@pytest.mark.parametrize("case", ["bf16", "e4nv", "fp32-0d", "bool"])
def test_plain_numpy_reads_it_without_pickle(tmp_path, case):
    t, fmt = CASES[case]
    p = tmp_path / "g.npz"
    write_golden(p, to_stored(t, fmt), META)
    with np.load(p, allow_pickle=False) as z:
        assert sorted(z.files) == ["meta", "tensor"]
        meta = json.loads(z["meta"].tobytes())
        assert list(z["tensor"].shape) == list(t.shape) == meta["shape"]


def test_bytes_are_deterministic_and_carry_no_dates(tmp_path):
    t, _ = CASES["bf16"]
    a = encode_golden(to_stored(t), META)
    write_golden(tmp_path / "a.npz", to_stored(t.clone()), META)
    write_golden(tmp_path / "b.npz", to_stored(t.clone()), dict(reversed(list(META.items()))))
    assert (tmp_path / "a.npz").read_bytes() == a == (tmp_path / "b.npz").read_bytes()
    with zipfile.ZipFile(io.BytesIO(a)) as zf:
        for info in zf.infolist():
            assert info.date_time == (1980, 1, 1, 0, 0, 0)
            assert info.compress_type == zipfile.ZIP_DEFLATED
    assert b"time" not in a.lower()
    assert not list(tmp_path.glob(".*.tmp")), "the atomic write left its temp file behind"


def test_metadata_is_recorded(tmp_path):
    t, _ = CASES["fp16"]
    meta = dict(META, op="qsa.logits", dtype_case="fp16-e4nv", seed=7, device="cpu")
    write_golden(tmp_path / "g.npz", to_stored(t), meta)
    _, back = read_golden(tmp_path / "g.npz")
    for k, v in meta.items():
        assert back[k] == v
    assert back["dtype"] == "float16" and back["storage"] == "<f2" and back["shape"] == [3, 7]


def test_float_nan_is_refused():
    t = torch.tensor([1.0, float("nan"), 2.0])
    with pytest.raises(GoldenError, match=r"1 NaN element\(s\)"):
        encode_golden(to_stored(t), META)


def test_fp8_nan_codes_are_just_codes(tmp_path):
    codes = torch.tensor([0x7F, 0xFF, 0x00], dtype=torch.uint8)
    write_golden(tmp_path / "g.npz", to_stored(codes, "e4nv"), META)
    back, meta = read_golden(tmp_path / "g.npz")
    assert torch.equal(back, codes) and meta["fmt"] == "e4nv"


@pytest.mark.parametrize(
    "tensor, fmt, exc, match",
    [
        ([1.0], None, TypeError, "must be a torch.Tensor"),
        (torch.zeros(2, dtype=torch.complex64), None, TypeError, "dense real"),
        (torch.zeros(2), "e4nv", ValueError, "needs FP8 codes"),
        (torch.zeros(2).to(torch.float8_e5m2), "e4nv", ValueError, "contradicts"),
        (torch.zeros(2, dtype=torch.uint16), None, TypeError, "not supported"),
    ],
)
def test_bad_tensors_are_named(tensor, fmt, exc, match):
    with pytest.raises(exc, match=match):
        to_stored(tensor, fmt)


# ------------------------------------------------------------------------------------- corrupt files

def _good(tmp_path) -> bytes:
    write_golden(tmp_path / "g.npz", to_stored(CASES["fp32"][0]), META)
    return (tmp_path / "g.npz").read_bytes()


@pytest.mark.parametrize("keep", [0, 10, 100, 0.5, -22, -1])
def test_truncated_files_are_rejected(tmp_path, keep):
    data = _good(tmp_path)
    n = int(len(data) * keep) if isinstance(keep, float) else keep % len(data)
    (tmp_path / "g.npz").write_bytes(data[:n])
    with pytest.raises(GoldenFormatError, match="truncated or corrupt"):
        read_golden(tmp_path / "g.npz")


def test_flipped_byte_is_caught_by_the_crc(tmp_path):
    data = bytearray(_good(tmp_path))
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as zf:
        info = zf.getinfo("tensor.npy")
    # a byte in the middle of the tensor member's deflate stream (its last byte may hold only padding bits)
    at = info.header_offset + 30 + len(info.filename) + info.compress_size // 2
    data[at] ^= 0x40
    (tmp_path / "g.npz").write_bytes(bytes(data))
    with pytest.raises(GoldenFormatError, match="CRC|corrupt"):
        read_golden(tmp_path / "g.npz")


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr)
    return buf.getvalue()


def _rezip(data: bytes, edit_meta=None, extra: dict[str, bytes] | None = None,
           drop: str | None = None, raw_meta: bytes | None = None, tensor: np.ndarray | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, "w") as zout:
        for name in zin.namelist():
            if name == drop:
                continue
            payload = zin.read(name)
            if name == "meta.npy" and edit_meta is not None:
                meta = json.loads(np.lib.format.read_array(io.BytesIO(payload)).tobytes())
                edit_meta(meta)
                payload = _npy(np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
            if name == "meta.npy" and raw_meta is not None:
                payload = _npy(np.frombuffer(raw_meta, dtype=np.uint8))
            if name == "tensor.npy" and tensor is not None:
                payload = _npy(tensor)
            zout.writestr(name, payload)
        for name, payload in (extra or {}).items():
            zout.writestr(name, payload)
    return out.getvalue()


def _pickled_npy() -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    return buf.getvalue()


@pytest.mark.parametrize(
    "edit, match",
    [
        (dict(edit_meta=lambda m: m.update(format_version=FORMAT_VERSION + 1)),
         f"format version {FORMAT_VERSION + 1}; this harness reads version {FORMAT_VERSION}"),
        (dict(edit_meta=lambda m: m.pop("format_version")), "format version None"),
        (dict(edit_meta=lambda m: m.pop("arch")), "metadata lacks arch"),
        (dict(edit_meta=lambda m: m.update(shape=[7, 3, 1])), r"metadata says <f4\[7, 3, 1\]"),
        (dict(edit_meta=lambda m: m.update(dtype="float16")), "does not hold dtype float16"),
        (dict(edit_meta=lambda m: m.update(dtype="no_such_dtype")), "unknown torch dtype"),
        (dict(drop="meta.npy"), "members are"),
        (dict(drop="tensor.npy"), "members are"),
        (dict(extra={"x.npy": b""}), "members are"),
    ],
)
def test_wrong_version_or_inconsistent_files_are_rejected(tmp_path, edit, match):
    (tmp_path / "g.npz").write_bytes(_rezip(_good(tmp_path), **edit))
    with pytest.raises(GoldenFormatError, match=match):
        read_golden(tmp_path / "g.npz")


_DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    "edit, match",
    [
        (dict(edit_meta=lambda m: m.update(shape=5)), "metadata field 'shape' is 5 .*expected a list of"),
        (dict(edit_meta=lambda m: m.update(shape=[3, True])), "metadata field 'shape'"),
        (dict(edit_meta=lambda m: m.update(shape=[-3, -7])), "metadata field 'shape'"),
        (dict(edit_meta=lambda m: m.update(shape=None)), "metadata field 'shape'"),
        (dict(edit_meta=lambda m: m.update(dtype=5)), "metadata field 'dtype' is 5 .*expected a str"),
        (dict(edit_meta=lambda m: m.update(dtype=["float32"])), "metadata field 'dtype'"),
        (dict(edit_meta=lambda m: m.update(storage=5)), "metadata field 'storage'"),
        (dict(edit_meta=lambda m: m.update(arch={"a": 1})), "metadata field 'arch'"),
        (dict(edit_meta=lambda m: m.update(name=None)), "metadata field 'name'"),
        (dict(edit_meta=lambda m: m.update(fmt=5)), "metadata field 'fmt'"),
        (dict(edit_meta=lambda m: m.update(op=5)), "metadata field 'op'"),
        (dict(edit_meta=lambda m: m.update(format_version=True)), "format version True"),
        (dict(edit_meta=lambda m: m.update(format_version=1.0)), "format version 1.0"),
        (dict(edit_meta=lambda m: m.update(dtype="Tensor")), "unknown torch dtype|not a golden dtype"),
        (dict(edit_meta=lambda m: m.update(dtype="complex64")), "not a golden dtype"),
        (dict(raw_meta=_DEEP), "unreadable metadata"),
        # deep enough to be no metadata of ours, shallow enough for every Python's json parser to accept
        (dict(raw_meta=b'{"a": ' * 20 + b"1" + b"}" * 20), r"unreadable metadata \(nested too deeply\)"),
        (dict(raw_meta=b'{"a": ' * 5000 + b"1" + b"}" * 5000), "unreadable metadata"),
        (dict(raw_meta=b"[1, 2]"), "meta is not a JSON object"),
        (dict(raw_meta=b"\xff\xfe"), "unreadable metadata"),
        (dict(raw_meta=b" " * (2 << 20) + b"{}"), "metadata member is .* bytes"),
        # bf16 stored as float32 words: viewing them as int16 would silently double the last dimension
        (dict(edit_meta=lambda m: m.update(dtype="bfloat16")), "does not hold dtype bfloat16"),
        # an FP8 format on a float tensor: its bytes would be read as codes
        (dict(edit_meta=lambda m: m.update(fmt="e4nv")), "fmt 'e4nv' needs uint8 codes"),
        (dict(edit_meta=lambda m: m.update(fmt="e9m9")), "metadata field 'fmt'.*unknown FP8 format"),
    ],
)
def test_malformed_metadata_is_a_format_error(tmp_path, edit, match):
    (tmp_path / "g.npz").write_bytes(_rezip(_good(tmp_path), **edit))
    with pytest.raises(GoldenFormatError, match=match) as info:
        read_golden(tmp_path / "g.npz")
    assert str(tmp_path / "g.npz") in str(info.value)


def _codes_golden(tmp_path, fmt_dtype=torch.float8_e4m3fn) -> bytes:
    codes = torch.arange(8, dtype=torch.uint8)
    write_golden(tmp_path / "g.npz", to_stored(codes.view(fmt_dtype)), META)
    return (tmp_path / "g.npz").read_bytes()


@pytest.mark.parametrize(
    "edit, match",
    [
        # codes array of the wrong dtype (the metadata agrees with it, the format does not)
        (dict(tensor=np.arange(8, dtype="<i2"), edit_meta=lambda m: m.update(dtype="int16", storage="<i2")),
         "fmt 'e4nv' needs uint8 codes"),
        (dict(tensor=np.arange(8, dtype="<f4"), edit_meta=lambda m: m.update(storage="<f4")),
         "does not hold dtype float8_e4m3fn"),
        (dict(tensor=np.arange(8, dtype="<i2")), "array is <i2"),
        (dict(edit_meta=lambda m: m.update(fmt="e5m2")), "contradicts dtype float8_e4m3fn"),
        (dict(edit_meta=lambda m: m.update(fmt=None)), "contradicts dtype float8_e4m3fn"),
        (dict(tensor=np.array([{"x": 1}] * 8, dtype=object), edit_meta=lambda m: m.update(storage="|O")),
         "allow_pickle|[Oo]bject"),
    ],
)
def test_fp8_codes_of_the_wrong_dtype_are_rejected(tmp_path, edit, match):
    (tmp_path / "g.npz").write_bytes(_rezip(_codes_golden(tmp_path), **edit))
    with pytest.raises(GoldenFormatError, match=match):
        read_golden(tmp_path / "g.npz")


def test_malformed_file_keeps_the_arch_it_names(tmp_path):
    """A regen run must know whose golden a damaged file was: it repairs only its own arch's."""
    (tmp_path / "g.npz").write_bytes(_rezip(_good(tmp_path), edit_meta=lambda m: m.update(shape=5, arch="sm90")))
    with pytest.raises(GoldenFormatError) as info:
        read_golden(tmp_path / "g.npz")
    assert info.value.arch == "sm90"
    (tmp_path / "g.npz").write_bytes(_good(tmp_path)[:40])
    with pytest.raises(GoldenFormatError) as info:
        read_golden(tmp_path / "g.npz")
    assert info.value.arch is None


def test_pickled_members_are_never_unpickled(tmp_path):
    data = _good(tmp_path)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, "w") as zout:
        zout.writestr("meta.npy", zin.read("meta.npy"))
        zout.writestr("tensor.npy", _pickled_npy())
    (tmp_path / "g.npz").write_bytes(out.getvalue())
    with pytest.raises(GoldenFormatError, match="allow_pickle|[Oo]bject"):
        read_golden(tmp_path / "g.npz")


def test_missing_file(tmp_path):
    with pytest.raises(GoldenMissingError, match="not found"):
        read_golden(tmp_path / "nope.npz")


# ------------------------------------------------------------------------------------------- paths

@pytest.mark.parametrize("name", ["out", "logits.bf16", "k_1-2", "A" * 100])
def test_good_names(name):
    assert validate_name(name) == name


@pytest.mark.parametrize("name", ["", "../x", "..", "a/b", "a\\b", "/etc/passwd", ".hidden", "a..b", "x.",
                                  "A" * 101, "a b", "naïve", "a\x00b", "C:x"])
def test_bad_names_are_rejected_naming_the_argument(name):
    with pytest.raises(ValueError, match=r"golden name .* is not allowed"):
        validate_name(name)


def test_non_string_name():
    with pytest.raises(TypeError, match="golden name must be a str"):
        validate_name(3)


@pytest.mark.parametrize("raw", ["..", ".", "../../etc", "a/b", "a\\b", "/abs", "x y[z]", "ü", "", "." * 300,
                                 "1.5-bf16-e4nv", "n=3"])
def test_sanitized_components_stay_one_plain_directory(raw):
    s = sanitize_component(raw)
    assert s and s not in (".", "..") and not s.startswith(".")
    assert "/" not in s and "\\" not in s and len(s) <= 120
    assert all(c.isascii() and (c.isalnum() or c in "._+=-") for c in s)
    assert sanitize_component(raw) == s
    if raw in ("1.5-bf16-e4nv", "n=3"):
        assert s == raw  # ordinary ids are kept verbatim, so paths stay readable


def test_long_ids_are_hashed_apart():
    a, b = "x" * 300 + "a", "x" * 300 + "b"
    assert sanitize_component(a) != sanitize_component(b)


def test_fixture_rejects_traversal(golden):
    with pytest.raises(ValueError, match="golden name '../escape' is not allowed"):
        golden.check("../escape", torch.zeros(2))
    with pytest.raises(ValueError, match="golden.load: param '../../x'"):
        golden.load("out", param="../../x")
    with pytest.raises(ValueError, match="golden.load: test 'a/b'"):
        golden.load("out", test="a/b")
    with pytest.raises(ValueError, match="golden.load: test '..::x'"):
        golden.load("out", test="..::x")
    with pytest.raises(TypeError, match="tol must be a harness.tolerances.Tolerance"):
        golden.check("out", torch.zeros(2), tol=0.1)
    assert golden.path("out").is_relative_to(golden.dir)


# -------------------------------------------------------------------------------------------- diff

def test_diff_counts_codes_and_worst_ulp():
    old = torch.tensor([0x38, 0x38, 0x40, 0x00, 0x80], dtype=torch.uint8)  # 1.0, 1.0, 2.0, +0, -0
    new = old.clone()
    new[1] = 0x39  # one code up from 1.0: 1.125
    new[2] = 0x3E  # two codes below 2.0: 1.75
    d = diff(to_stored(new, "e4nv"), to_stored(old, "e4nv"))
    assert (d.elements, d.changed, d.worst_ulp) == (5, 2, 2)
    assert d.worst_abs == 0.25  # |1.75 - 2|: both exactly representable


def test_diff_of_floats_and_layout():
    old = torch.arange(6, dtype=torch.float32)
    new = old.clone()
    new[4] = torch.nextafter(new[4], torch.tensor(10.0))
    d = diff(to_stored(new), to_stored(old))
    assert (d.changed, d.worst_ulp) == (1, None)
    assert d.worst_abs == float(new[4] - old[4])
    d = diff(to_stored(old.reshape(2, 3)), to_stored(old))
    assert d.layout == "shape: got (2, 3), golden holds (6,)" and d.changed == 6
    d = diff(to_stored(old.half()), to_stored(old))
    assert d.layout == "dtype: got float16, golden holds float32"


# ------------------------------------------------------------------------------------- failure messages


def _golden_record(**kw):
    return GoldenMismatch(name="out", path="golden/t/test_x/_/out.npz", generated_on="sm90", device="H200",
                          torch_version="2.11", triton_version="3.6", running_on="interp", **kw)


HEAD = ["golden 'out' does not match golden/t/test_x/_/out.npz",
        "  golden: generated on sm90 (H200), torch 2.11, triton 3.6; running on interp"]


def test_report_builds_the_integer_golden_message():
    rows = [((i, 0), i + 1, i) for i in range(INT_ROWS)]
    m = _golden_record(n=40, int_k=12, int_rows=rows)
    lines = format_golden(m).splitlines()
    assert lines[:5] == HEAD + ["  tolerance: exact (integer/bool tensors)", "  Mismatched elements: 12 / 40 (30.0%)",
                                "  index  obtained  expected"]
    assert lines[5] == "  (0, 0)  1  0" and lines[-1] == "  ... 2 more"
    assert len(lines) == 5 + INT_ROWS + 1
    assert format_golden(_golden_record(n=3, int_k=1, int_rows=[((2,), True, False)])).splitlines()[-1] == (
        "  (2,)  True  False")


def test_report_builds_the_layout_bits_and_compare_golden_messages():
    from harness.tolerances import Tolerance

    assert format_golden(_golden_record(layout="shape: got (2,), golden holds (3,)")).splitlines() == HEAD + [
        "  shape: got (2,), golden holds (3,)"]
    exact = Tolerance(key="golden/exact/interp")
    m = _golden_record(n=4, tol=exact, why="same arch: bit-exact", bits_differ=1)
    assert format_golden(m).splitlines() == HEAD + [
        "  tolerance: Tolerance(rtol=0.0e+00, atol=0.0e+00) [golden/exact/interp] (same arch: bit-exact)",
        "  1 / 4 elements are equal in value but differ in bits (signed zero or NaN payload); bit-exact is "
        "required on the generating arch"]
    from harness import summary

    with summary.suspended():
        cmp = check_close(torch.ones(4), torch.zeros(4), exact, op="golden/x")
    m = _golden_record(n=4, tol=exact, why="same arch: bit-exact", mismatch=cmp)
    assert format_golden(m) == "\n".join(HEAD + [
        "  tolerance: Tolerance(rtol=0.0e+00, atol=0.0e+00) [golden/exact/interp] (same arch: bit-exact)",
        format_mismatch(cmp)])


# --------------------------------------------------- found by mutating harness/golden/files.py: naming limits


def test_a_component_of_the_longest_length_is_kept_and_one_longer_is_hashed():
    from harness.golden.files import _MAX_COMPONENT

    assert _MAX_COMPONENT == 120
    assert sanitize_component("x" * 120) == "x" * 120
    long = sanitize_component("x" * 121)
    assert len(long) == 120 and long[:103] == "x" * 103 and long[103] == "-" and len(long[104:]) == 16
    assert sanitize_component(".hidden") == "_hidden" and sanitize_component("a.b") == "a.b"


@pytest.mark.parametrize("param", ["a/b", "a\\b", "a\x00b", ".x", ".."])
def test_a_param_that_is_not_an_id_is_refused(param):
    from harness.golden.files import param_component

    with pytest.raises(ValueError, match=re.escape("must be a param id (no '/', '\\', NUL or leading '.')")):
        param_component(param)


def test_param_ids_and_test_refs_that_are_kept():
    from harness.golden.files import param_component, split_test_ref

    assert param_component("1.5-bf16") == "1.5-bf16" and param_component("x.") == "x."
    assert split_test_ref("test_a", "mod") == ("mod", "test_a")
    assert split_test_ref("other::test_a", "mod") == ("other", "test_a")
    for bad in ("a::b::c", "a::b::", "::"):
        with pytest.raises(ValueError, match="must be 'test_name' or 'module_stem::test_name'"):
            split_test_ref(bad, "mod")


def test_inside_refuses_the_root_itself_and_its_siblings(tmp_path):
    """A golden path is a file strictly inside the golden dir: the dir itself, a sibling sharing its name as a
    prefix (golden2/ next to golden/) and a path climbing out are refused; a file below is taken, made absolute."""
    from harness.golden.files import GoldenPathError, inside

    root = tmp_path / "golden"
    assert inside(root, root / "a" / "b.npz") == root / "a" / "b.npz"
    for bad in (root, root / ".", tmp_path / "golden2" / "x.npz", root / ".." / "x.npz"):
        with pytest.raises(GoldenPathError, match="escapes the golden dir"):
            inside(root, bad)
