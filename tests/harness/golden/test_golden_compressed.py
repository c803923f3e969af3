"""Goldens are deflated zips (since 2026-12-04): the format round trip, old stored files still read, the
bytes deterministic, every member's declared size checked before it is inflated, ``golden repack``
replacing a file only once it has proven the arrays and metadata unchanged, and the repository's golden
dir within its size budget."""

from __future__ import annotations

import io
import json
import os
import struct
import zipfile
import zlib

import numpy as np
import pytest
import torch

from harness.golden import cli as golden_cli
from harness.golden import files
from harness.golden.files import (
    COMPRESS_LEVEL,
    GoldenError,
    GoldenFormatError,
    decode_golden,
    encode_golden,
    read_golden,
    repack,
    to_stored,
    write_golden,
)

pytestmark = pytest.mark.lane_independent  # the same on every lane: the GPU lane skips it

META = {"name": "out", "arch": "sm90", "harness_version": "test", "op": None, "seed": 3}

#: The repository's golden dir may hold at most this many bytes (issue 26: "the whole golden/ stays <= 8 MB";
#: MB read as 10^6 bytes, the stricter reading). A size budget of the checkout, not a timing.
GOLDEN_DIR_BUDGET = 8 * 10**6


def _tensor(seed: int = 1, n: int = 4096) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, generator=g) * 3).round(decimals=1)  # compressible, as real outputs often are


def _stored_zip(data: bytes) -> bytes:
    """The same members in the layout before 2026-12-04: ZIP_STORED, same dates and attributes."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            new = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            new.create_system, new.external_attr = info.create_system, info.external_attr
            zout.writestr(new, zin.read(info))
    return out.getvalue()


def _zip(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as zf:
        for name, payload in members.items():
            zf.writestr(name, payload)
    return out.getvalue()


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _meta_npy(meta: dict) -> bytes:
    return _npy(np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))


def _headers(buf: bytes | bytearray, member: str | None = None) -> list[tuple[int, bool]]:
    """(offset, is_local) of every local header and central directory entry, of ``member`` only if given."""
    out = []
    for sig, local in ((b"PK\x03\x04", True), (b"PK\x01\x02", False)):
        pos = 0
        while (pos := buf.find(sig, pos)) >= 0:
            name_at = pos + (30 if local else 46)
            if member is None or buf[name_at:name_at + len(member)] == member.encode():
                out.append((pos, local))
            pos += 4
    return out


def _declare_size(data: bytes, member: str, size: int) -> bytes:
    """``data`` with ``member``'s uncompressed size rewritten in its local header and central directory
    entry (what a crafted file can claim; the CRC and the payload are left as they are)."""
    buf = bytearray(data)
    for pos, local in _headers(buf, member):
        struct.pack_into("<I", buf, pos + (22 if local else 24), size)
    return bytes(buf)


# ------------------------------------------------------------------------------------ format


def test_members_are_deflated_at_the_fixed_level_and_read_back_bit_exact(tmp_path):
    t = _tensor()
    data = write_golden(tmp_path / "g.npz", to_stored(t), META)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for info in zf.infolist():
            assert info.compress_type == zipfile.ZIP_DEFLATED
            raw = zf.read(info)
            c = zlib.compressobj(COMPRESS_LEVEL, zlib.DEFLATED, -15)
            assert info.compress_size == len(c.compress(raw) + c.flush()), "not the fixed level"
        assert zf.getinfo("tensor.npy").compress_size < zf.getinfo("tensor.npy").file_size // 2
    back, meta = read_golden(tmp_path / "g.npz")
    assert back.dtype == t.dtype and torch.equal(back.view(torch.int32), t.view(torch.int32))
    assert meta["seed"] == 3 and meta["shape"] == [4096]
    with np.load(tmp_path / "g.npz", allow_pickle=False) as z:  # still a plain npz for numpy
        assert np.array_equal(z["tensor"].view(np.uint32), t.numpy().view(np.uint32))


def test_stored_goldens_of_the_old_layout_still_read(tmp_path):
    t = _tensor(2).to(torch.bfloat16)
    new = encode_golden(to_stored(t), META)
    old = _stored_zip(new)
    with zipfile.ZipFile(io.BytesIO(old)) as zf:
        assert {i.compress_type for i in zf.infolist()} == {zipfile.ZIP_STORED}
    a, ma = decode_golden(old)
    b, mb = decode_golden(new)
    assert ma == mb and torch.equal(a.view(torch.int16), t.view(torch.int16))
    assert torch.equal(b.view(torch.int16), t.view(torch.int16))


def test_encoding_is_deterministic():
    t = _tensor(3)
    a = encode_golden(to_stored(t), META)
    b = encode_golden(to_stored(t.clone()), dict(reversed(list(META.items()))))
    assert a == b
    with zipfile.ZipFile(io.BytesIO(a)) as zf:
        assert [(i.date_time, i.external_attr >> 16, i.create_system) for i in zf.infolist()] == \
            [((1980, 1, 1, 0, 0, 0), 0o644, 3)] * 2


# -------------------------------------------------------------------------------- size guard


def test_a_declared_size_past_what_the_header_needs_is_refused_before_inflating(tmp_path):
    data = encode_golden(to_stored(_tensor()), META)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        size = zf.getinfo("tensor.npy").file_size
    (tmp_path / "g.npz").write_bytes(_declare_size(data, "tensor.npy", size + 4))
    with pytest.raises(GoldenFormatError,
                       match=rf"g\.npz is truncated or corrupt .*member tensor\.npy declares {size + 4} "
                             rf"uncompressed bytes, but its npy header needs {size}"):
        read_golden(tmp_path / "g.npz")


def test_a_member_that_inflates_past_its_declared_size_is_refused():
    """A bomb: a few KB of deflate that inflate to 64 MB, declared as the 80 bytes its header says."""
    header = _npy(np.zeros(0, dtype=np.uint8))
    bomb = _zip({"tensor.npy": header + bytes(64 << 20), "meta.npy": _meta_npy(dict(META, format_version=1))})
    assert len(bomb) < 100_000
    crafted = _declare_size(bomb, "tensor.npy", len(header))
    with pytest.raises(GoldenFormatError, match="truncated or corrupt .*Bad CRC-32"):
        decode_golden(crafted)


def test_a_huge_declared_array_from_a_tiny_file_is_refused_by_the_deflate_ratio():
    # a header claiming 1 GB of float32, honest about it in the declared size, in a file of a few hundred bytes
    header = _npy(np.zeros(0, dtype=np.float32)).replace(b"(0,)", b"(250000000,)")
    header = header[:8] + struct.pack("<H", len(header) - 10) + header[10:]
    n = len(header) + 250_000_000 * 4
    crafted = _declare_size(_zip({"tensor.npy": header + b"\0" * 64, "meta.npy": _meta_npy(META)}), "tensor.npy", n)
    with pytest.raises(GoldenFormatError, match=rf"member tensor\.npy declares {n} bytes from \d+ compressed "
                                                r"bytes, past deflate's 1032:1 limit"):
        decode_golden(crafted)


def test_other_compression_methods_are_refused():
    data = _zip({"tensor.npy": _npy(np.zeros(3, np.float32)), "meta.npy": _meta_npy(META)}, zipfile.ZIP_BZIP2)
    with pytest.raises(GoldenFormatError, match=r"compression method 12, expected stored \(0\) or deflated \(8\)"):
        decode_golden(data, "x.npz")


def test_object_arrays_are_refused_before_reading():
    header = _npy(np.zeros(0, dtype=np.float32)).replace(b"'<f4'", b"'|O' ")
    data = _zip({"tensor.npy": header, "meta.npy": _meta_npy(META)})
    with pytest.raises(GoldenFormatError, match="holds Python objects"):
        decode_golden(data, "x.npz")


# ------------------------------------------------------------------------------------ repack


def _raw(t: torch.Tensor) -> bytes:
    return t.reshape(-1).view(torch.uint8).numpy().tobytes()


def _legacy(tmp_path, name: str, t: torch.Tensor, fmt: str | None = None):
    p = tmp_path / "golden" / "m" / "t" / "_" / f"{name}.npz"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(_stored_zip(encode_golden(to_stored(t, fmt), dict(META, name=name))))
    return p


@pytest.mark.parametrize("kind", ["fp32", "bf16", "e4nv", "codes", "int", "0d"])
def test_repack_changes_no_array_and_no_metadata(tmp_path, kind):
    t = _tensor(4, 2048)
    t, fmt = {"fp32": (t, None), "bf16": (t.bfloat16(), None), "e4nv": (t.to(torch.float8_e4m3fn), None),
              "codes": (torch.arange(256, dtype=torch.uint8), "e5m2"), "int": (t.to(torch.int32), None),
              "0d": (torch.tensor(1.5), None)}[kind]
    p = _legacy(tmp_path, "out", t, fmt)
    before_bytes = p.read_bytes()
    before = read_golden(p)
    r = repack(p, root=tmp_path / "golden")
    assert r.action == "repacked" and r.old_size == len(before_bytes) and r.new_size == p.stat().st_size
    after = read_golden(p)
    assert after[1] == before[1]
    assert after[0].dtype == before[0].dtype and after[0].shape == before[0].shape
    assert _raw(after[0]) == _raw(before[0]) == _raw(t)
    assert p.read_bytes() == encode_golden(files.read_stored(p)[0], after[1])
    assert repack(p, root=tmp_path / "golden").action == "unchanged"
    assert not list(p.parent.glob(".*.tmp"))


def test_repack_refuses_a_file_it_cannot_read_and_leaves_it(tmp_path):
    p = _legacy(tmp_path, "out", _tensor())
    data = p.read_bytes()[:-30]
    p.write_bytes(data)
    with pytest.raises(GoldenFormatError, match="out.npz is truncated or corrupt"):
        repack(p, root=tmp_path / "golden")
    assert p.read_bytes() == data


def test_repack_refuses_a_file_it_cannot_re_encode_and_leaves_it(tmp_path):
    """A float golden holding NaN (written by some other tool: encode_golden refuses NaN) cannot be
    re-encoded, so it is not touched."""
    p = tmp_path / "golden" / "nan.npz"
    p.parent.mkdir()
    arr = np.array([1.0, np.nan], dtype=np.float32)
    meta = dict(META, format_version=1, dtype="float32", storage="<f4", shape=[2], fmt=None)
    p.write_bytes(_zip({"tensor.npy": _npy(arr), "meta.npy": _meta_npy(meta)}, zipfile.ZIP_STORED))
    before = p.read_bytes()
    with pytest.raises(GoldenError, match=r"nan\.npz not repacked: it cannot be re-encoded .*NaN"):
        repack(p, root=tmp_path / "golden")
    assert p.read_bytes() == before


def test_repack_refuses_when_the_new_bytes_would_not_decode_to_the_same_values(tmp_path, monkeypatch):
    p = _legacy(tmp_path, "out", _tensor())
    before = p.read_bytes()
    real = files.encode_golden

    def off_by_one_bit(stored, meta):
        t = stored.tensor.clone()
        t.view(torch.int32)[7] ^= 1
        return real(files.Stored(t, stored.kind, stored.fmt), meta)

    monkeypatch.setattr(files, "encode_golden", off_by_one_bit)
    with pytest.raises(GoldenError, match=r"out\.npz not repacked: re-encoding it would change 1 of 4096 array "
                                          r"elements; it is left as it is"):
        repack(p, root=tmp_path / "golden")
    assert p.read_bytes() == before

    monkeypatch.setattr(files, "encode_golden", lambda stored, meta: real(stored, dict(meta, seed=4)))
    with pytest.raises(GoldenError, match="would change the metadata"):
        repack(p, root=tmp_path / "golden")
    assert p.read_bytes() == before


def test_repack_command_names_what_it_refused(tmp_path, capsys):
    good = _legacy(tmp_path, "good", _tensor())
    bad = _legacy(tmp_path, "bad", _tensor(5))
    bad.write_bytes(bad.read_bytes()[:100])
    good_before = read_golden(good)
    assert golden_cli.repack_goldens(tmp_path / "golden") == 1
    out = capsys.readouterr().out
    assert "refused    m/t/_/bad.npz: golden file" in out and "repacked   m/t/_/good.npz" in out
    assert "golden repack: 2 files, 1 repacked, 0 unchanged, 1 refused;" in out
    back = read_golden(good)
    assert back[1] == good_before[1] and torch.equal(back[0], good_before[0])
    bad.unlink()
    assert golden_cli.repack_goldens(tmp_path / "golden") == 0
    assert "1 files, 0 repacked, 1 unchanged, 0 refused" in capsys.readouterr().out
    assert golden_cli.repack_goldens(tmp_path / "absent") == 2
    assert "is not a directory (expected the golden dir)" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ budget


def test_the_repository_golden_dir_stays_within_its_size_budget(pytestconfig):
    root = pytestconfig.rootpath / (pytestconfig.getini("golden_dir") or "golden")
    if not root.is_dir():
        pytest.skip(f"no golden dir at {root}")
    sizes = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            sizes[os.path.relpath(p, root)] = os.lstat(p).st_size
    total = sum(sizes.values())
    biggest = sorted(sizes.items(), key=lambda kv: -kv[1])[:5]
    assert total <= GOLDEN_DIR_BUDGET, (
        f"{root} holds {total:,} bytes, over its budget of {GOLDEN_DIR_BUDGET:,}; largest: "
        + ", ".join(f"{k} ({v:,})" for k, v in biggest)
        + ". Store fewer outputs, regenerate inputs from seeds, or run `python -m harness golden repack`."
    )
    stored = [k for k in sizes if k.endswith(".npz") and _has_stored_member(root / k)]
    assert not stored, f"goldens still in the stored layout (run `python -m harness golden repack`): {stored[:5]}"


def _has_stored_member(p) -> bool:
    with zipfile.ZipFile(p) as zf:
        return any(i.compress_type == zipfile.ZIP_STORED for i in zf.infolist())


# --------------------------------------------------- found by mutating harness/golden/files.py: reading limits


def _members() -> dict[str, bytes]:
    """The members of a fresh golden of ``_tensor()``, by name: the parts the tests below swap one at a time."""
    with zipfile.ZipFile(io.BytesIO(encode_golden(to_stored(_tensor()), META))) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def _meta_of(members: dict[str, bytes]) -> bytes:
    return np.lib.format.read_array(io.BytesIO(members["meta.npy"])).tobytes()


def test_members_are_npy_1_0_dated_1980_mode_0644(tmp_path):
    data = write_golden(tmp_path / "g.npz", to_stored(_tensor()), META)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for info in zf.infolist():
            assert info.date_time == (1980, 1, 1, 0, 0, 0) and info.external_attr >> 16 == 0o644
            assert zf.read(info)[6:8] == b"\x01\x00"  # npy version 1.0
    assert (tmp_path / "g.npz").stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("version", [(2, 0), (3, 0)])
def test_npy_members_of_version_2_and_3_read(version):
    members = _members()
    arr = np.lib.format.read_array(io.BytesIO(members["tensor.npy"]))
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, version=version, allow_pickle=False)
    t, _ = decode_golden(_zip({**members, "tensor.npy": buf.getvalue()}))
    assert torch.equal(t, _tensor())


def test_npy_members_of_another_version_or_no_npy_are_refused():
    members = _members()
    npy = members["tensor.npy"]
    with pytest.raises(GoldenFormatError, match="member tensor.npy has npy version 4, expected 1, 2 or 3"):
        decode_golden(_zip({**members, "tensor.npy": npy[:6] + b"\x04" + npy[7:]}))
    with pytest.raises(GoldenFormatError, match="member tensor.npy is not an npy array"):
        decode_golden(_zip({**members, "tensor.npy": b"\x93NUMPX" + npy[6:]}))  # long enough, wrong magic


def test_encrypted_members_are_refused():
    data = bytearray(encode_golden(to_stored(_tensor()), META))
    for pos, local in _headers(data):
        data[pos + (6 if local else 8)] |= 0x1  # the general-purpose flags' encryption bit
    with pytest.raises(GoldenFormatError, match=r"member (meta|tensor)\.npy is encrypted"):
        decode_golden(bytes(data))


def test_the_deflate_ratio_limit_is_1032_to_1_plus_64_bytes():
    data = encode_golden(to_stored(_tensor(n=1 << 16)), META)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        size = zf.getinfo("tensor.npy").compress_size
    at_limit = 1032 * size + 64
    # at the limit the size passes this check and meets the npy header's; one byte more is a bomb
    with pytest.raises(GoldenFormatError, match=f"declares {at_limit} uncompressed bytes, but its npy header needs"):
        decode_golden(_declare_size(data, "tensor.npy", at_limit))
    with pytest.raises(GoldenFormatError, match=f"declares {at_limit + 1} bytes from {size} compressed bytes, "
                                                f"past deflate's 1032:1 limit"):
        decode_golden(_declare_size(data, "tensor.npy", at_limit + 1))


def test_metadata_of_exactly_one_mib_reads_and_one_byte_more_is_refused():
    members = _members()
    meta = _meta_of(members)

    def meta_member(total: int) -> bytes:
        # the npy header's length depends only on the digits of the shape: pad the JSON to hit ``total``
        head = len(_npy(np.zeros(total, dtype=np.uint8))) - total
        return _npy(np.frombuffer(meta + b" " * (total - head - len(meta)), dtype=np.uint8))

    exact = meta_member(1 << 20)
    assert len(exact) == 1 << 20
    t, got = decode_golden(_zip({**members, "meta.npy": exact}))
    assert torch.equal(t, _tensor()) and got["name"] == "out"
    with pytest.raises(GoldenFormatError, match="metadata member is 1048577 bytes, more than 1048576"):
        decode_golden(_zip({**members, "meta.npy": meta_member((1 << 20) + 1)}))


@pytest.mark.parametrize("arr", [np.zeros((2, 8), dtype=np.uint8), np.zeros(8, dtype=np.int16)])
def test_a_meta_member_that_is_not_1d_bytes_is_refused(arr):
    members = _members()
    with pytest.raises(GoldenFormatError, match=r"unreadable metadata \(meta member is not a 1-d uint8 array\)"):
        decode_golden(_zip({**members, "meta.npy": _npy(arr)}))


def test_metadata_nested_16_deep_is_read_and_17_is_refused():
    members = _members()
    base = json.loads(_meta_of(members))

    def nested(depth: int) -> dict:
        v: object = 1
        for _ in range(depth):  # one object a level
            v = {"a": v}
        return v  # type: ignore[return-value]

    assert files._json_depth(1) == 0 and files._json_depth({"a": 1}) == 1 and files._json_depth(nested(16)) == 16
    assert files._json_depth([[], {"a": [1]}]) == 3
    t, got = decode_golden(_zip({**members, "meta.npy": _meta_npy({**base, "test": nested(15)})}))
    assert got["test"] == nested(15)
    with pytest.raises(GoldenFormatError, match=r"unreadable metadata \(nested too deeply\)"):
        decode_golden(_zip({**members, "meta.npy": _meta_npy({**base, "test": nested(16)})}))
    with pytest.raises(GoldenFormatError, match=r"metadata field 'test' is 5 \(int\), expected null or an object"):
        decode_golden(_zip({**members, "meta.npy": _meta_npy({**base, "test": 5})}))
    assert decode_golden(_zip({**members, "meta.npy": _meta_npy({**base, "test": None})}))[1]["test"] is None


def test_what_a_repack_would_change_is_named():
    a = np.arange(6, dtype=np.int16)
    meta = np.frombuffer(b'{"a":1}', dtype=np.uint8)
    assert files._same((meta, a), (meta, a.copy())) is None
    assert files._same((meta, a), (meta, a.astype(np.int32))) == "the array's type (<i2[6] became <i4[6])"
    assert files._same((meta, a), (meta, a.reshape(2, 3))) == "the array's type (<i2[6] became <i2[2, 3])"
    assert files._same((meta, a), (meta, a + np.array([0, 1, 0, 0, 1, 0], dtype=np.int16))) == "2 of 6 array elements"
    assert files._same((meta, a), (np.frombuffer(b'{"a":2}', dtype=np.uint8), a)) == "the metadata"


def test_read_golden_with_a_root_refuses_a_path_outside_it(tmp_path):
    root = tmp_path / "golden"
    (root / "m").mkdir(parents=True)
    write_golden(tmp_path / "outside.npz", to_stored(_tensor()), META)
    write_golden(root / "m" / "in.npz", to_stored(_tensor()), META)
    assert torch.equal(read_golden(root / "m" / "in.npz", root=root)[0], _tensor())
    assert torch.equal(read_golden(tmp_path / "outside.npz")[0], _tensor())
    with pytest.raises(files.GoldenPathError, match="escapes the golden dir"):
        read_golden(root / ".." / "outside.npz", root=root)


def test_an_honest_zip_bomb_is_refused_by_the_absolute_cap(tmp_path, monkeypatch):
    """A golden whose sizes are all honest (within deflate's ratio, header and CRC consistent) was inflated whatever
    its size: 0.5 MB to 512 MiB. The cap (HARNESS_GOLDEN_MAX_BYTES, default 256 MiB) refuses it before inflating,
    naming the file, the member and the setting. Here 2 MiB of zeros (a few KB deflated) against a 1 MiB cap."""
    assert files.DEFAULT_MAX_BYTES == 256 << 20
    data = encode_golden(to_stored(torch.zeros(1 << 19)), META)  # 2 MiB of float32 zeros
    p = tmp_path / "bomb.npz"
    p.write_bytes(data)
    assert len(data) < 1 << 14
    read_golden(p)  # within the default cap
    monkeypatch.setenv("HARNESS_GOLDEN_MAX_BYTES", str(1 << 20))
    with pytest.raises(GoldenFormatError, match=r"golden file .*bomb.npz: member tensor.npy takes 2,097,280 bytes, "
                                                r"more than the 1,048,576-byte cap of a golden \(set "
                                                r"HARNESS_GOLDEN_MAX_BYTES to read bigger ones\); not read"):
        read_golden(p)
    monkeypatch.setenv("HARNESS_GOLDEN_MAX_BYTES", str(len(data) - 1))  # the file itself is over the cap
    with pytest.raises(GoldenFormatError, match=r"golden file .*bomb.npz takes [\d,]+ bytes, more than the"):
        read_golden(p)
    monkeypatch.setenv("HARNESS_GOLDEN_MAX_BYTES", str(1 << 20))
    with pytest.raises(GoldenError, match=r"golden 'out': refusing to store 2,097,152 bytes, more than the "
                                          r"1,048,576-byte cap"):
        write_golden(tmp_path / "new.npz", to_stored(torch.zeros(1 << 19)), META)
    assert not (tmp_path / "new.npz").exists()


def test_the_members_together_count_against_the_cap(tmp_path, monkeypatch):
    meta = json.dumps({"name": "x"}).encode()
    two = _zip({"meta.npy": _npy(np.frombuffer(meta, np.uint8)), "tensor.npy": _npy(np.zeros(3000, np.uint8))})
    monkeypatch.setenv("HARNESS_GOLDEN_MAX_BYTES", "3200")  # each member fits, the two together do not
    with pytest.raises(GoldenFormatError, match=r"\(its members inflated\) takes [\d,]+ bytes, more than the 3,200"):
        decode_golden(two, tmp_path / "g.npz")


@pytest.mark.parametrize("value", ["0", "-1", "1e9", "lots", "\u00b2", "1_000"])
def test_a_cap_that_is_no_size_is_refused_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("HARNESS_GOLDEN_MAX_BYTES", value)
    with pytest.raises(ValueError, match=rf"HARNESS_GOLDEN_MAX_BYTES='{value}': expected a positive int"):
        files.max_bytes()
