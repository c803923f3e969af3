"""Golden files are read and written only as regular files inside the golden dir.

Symlinks (of a file, of a directory under the golden dir, of the golden dir itself), FIFOs, directories
at a file's path and paths that leave the golden dir are refused before anything is opened, with an error
that names the path and what to do. The pytest side of the same rules is in test_golden_workflow.py.
"""

from __future__ import annotations

import os
import threading

import pytest
import torch

from harness.golden.files import (
    GoldenFormatError,
    GoldenMissingError,
    GoldenPathError,
    read_golden,
    to_stored,
    write_golden,
)

pytestmark = pytest.mark.lane_independent  # the same on every lane: the GPU lane skips it

META = {"name": "out", "arch": "interp", "harness_version": "test", "op": None}
needs_symlinks = pytest.mark.skipif(not hasattr(os, "symlink") or os.name == "nt", reason="POSIX symlinks")
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")


def _stored(value: float = 1.0):
    return to_stored(torch.full((3,), value))


@pytest.fixture
def tree(tmp_path):
    """``golden/`` holding one good file, and ``outside/`` next to it holding another."""
    root, outside = tmp_path / "golden", tmp_path / "outside"
    write_golden(root / "m" / "t" / "_" / "out.npz", _stored(1.0), META, root=root)
    write_golden(outside / "out.npz", _stored(2.0), META)
    return root, outside


def test_regular_files_inside_the_root_work(tree):
    root, _ = tree
    t, meta = read_golden(root / "m" / "t" / "_" / "out.npz", root=root)
    assert torch.equal(t, torch.full((3,), 1.0)) and meta["name"] == "out"
    with pytest.raises(GoldenMissingError, match="not found"):
        read_golden(root / "m" / "t" / "_" / "nope.npz", root=root)
    with pytest.raises(GoldenMissingError, match="not found"):
        read_golden(root / "m" / "absent_dir" / "_" / "out.npz", root=root)


@needs_symlinks
def test_symlinked_file_pointing_outside_is_not_read(tree):
    root, outside = tree
    link = root / "m" / "t" / "_" / "linked.npz"
    link.symlink_to(outside / "out.npz")
    with pytest.raises(GoldenPathError, match=r"linked\.npz is a symlink .*replace the link"):
        read_golden(link, root=root)
    # without a root too: a golden is a regular file, never a link
    with pytest.raises(GoldenPathError, match="is a symlink"):
        read_golden(link)


@needs_symlinks
def test_symlinked_file_is_not_replaced_and_its_target_not_written(tree):
    root, outside = tree
    link = root / "m" / "t" / "_" / "linked.npz"
    link.symlink_to(outside / "out.npz")
    before = (outside / "out.npz").read_bytes()
    with pytest.raises(GoldenPathError, match="is a symlink"):
        write_golden(link, _stored(3.0), META, root=root)
    assert link.is_symlink() and (outside / "out.npz").read_bytes() == before


@needs_symlinks
def test_symlinked_directory_is_neither_read_nor_written_through(tree):
    root, outside = tree
    (root / "linked").symlink_to(outside, target_is_directory=True)
    with pytest.raises(GoldenPathError, match=r"golden/linked is a symlink"):
        read_golden(root / "linked" / "out.npz", root=root)
    with pytest.raises(GoldenPathError, match=r"golden/linked is a symlink"):
        write_golden(root / "linked" / "t" / "_" / "new.npz", _stored(), META, root=root)
    assert sorted(p.name for p in outside.iterdir()) == ["out.npz"], "nothing may be created through a link"


@needs_symlinks
def test_symlink_inside_the_tree_pointing_back_inside_is_refused_too(tree):
    root, _ = tree
    (root / "alias").symlink_to(root / "m", target_is_directory=True)
    with pytest.raises(GoldenPathError, match="is a symlink"):
        read_golden(root / "alias" / "t" / "_" / "out.npz", root=root)


@needs_symlinks
def test_symlinked_golden_dir_itself_is_refused(tree, tmp_path):
    root, _ = tree
    alias = tmp_path / "golden_alias"
    alias.symlink_to(root, target_is_directory=True)
    with pytest.raises(GoldenPathError, match=r"golden dir .*golden_alias is a symlink"):
        read_golden(alias / "m" / "t" / "_" / "out.npz", root=alias)
    with pytest.raises(GoldenPathError, match=r"golden dir .*golden_alias is a symlink"):
        write_golden(alias / "m" / "t" / "_" / "new.npz", _stored(), META, root=alias)
    assert not (root / "m" / "t" / "_" / "new.npz").exists()


@pytest.mark.parametrize("rel", ["../outside/out.npz", "m/../../outside/out.npz", "/etc/passwd"])
def test_paths_leaving_the_root_are_refused(tree, rel):
    root, outside = tree
    before = (outside / "out.npz").read_bytes()
    with pytest.raises(GoldenPathError, match="escapes the golden dir"):
        read_golden(root / rel, root=root)
    with pytest.raises(GoldenPathError, match="escapes the golden dir"):
        write_golden(root / rel, _stored(3.0), META, root=root)
    assert (outside / "out.npz").read_bytes() == before


def test_directory_at_the_file_path_is_a_format_error_naming_the_fix(tree):
    root, _ = tree
    d = root / "m" / "t" / "_" / "dir.npz"
    d.mkdir()
    for kw in ({"root": root}, {}):
        with pytest.raises(GoldenFormatError,
                           match=r"dir\.npz is a directory, not a golden file: remove it \(rm -r\), then"):
            read_golden(d, **kw)
    with pytest.raises(GoldenFormatError, match="is a directory"):
        write_golden(d, _stored(), META, root=root)
    assert d.is_dir()


def test_file_where_a_directory_belongs(tree):
    root, _ = tree
    (root / "m" / "file").write_bytes(b"x")
    with pytest.raises(GoldenPathError, match=r"golden/m/file is not a directory"):
        read_golden(root / "m" / "file" / "_" / "out.npz", root=root)
    with pytest.raises(GoldenPathError, match=r"golden/m/file is not a directory"):
        write_golden(root / "m" / "file" / "_" / "out.npz", _stored(), META, root=root)


@needs_fifo
def test_fifo_is_refused_without_blocking(tree):
    root, _ = tree
    fifo = root / "m" / "t" / "_" / "fifo.npz"
    os.mkfifo(fifo)
    errors: list[BaseException] = []

    def read() -> None:
        try:
            read_golden(fifo, root=root)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            errors.append(e)

    th = threading.Thread(target=read, daemon=True)
    th.start()
    th.join(10)
    if th.is_alive():  # release the blocked open() so the thread can end, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        th.join(10)
        pytest.fail("read_golden blocked on a FIFO")
    assert len(errors) == 1 and isinstance(errors[0], GoldenFormatError), errors
    assert "fifo.npz is a FIFO, not a golden file: remove it" in str(errors[0])
    with pytest.raises(GoldenFormatError, match="is a FIFO"):
        write_golden(fifo, _stored(), META, root=root)
    assert fifo.exists() and not fifo.is_file()


@needs_symlinks
def test_the_leftover_sweep_never_walks_a_symlinked_golden_dir(tmp_path):
    """The sweep deletes temp files of killed writes; through a linked golden dir it would delete them elsewhere."""
    from harness.golden.unused import leftover_temps, remove_leftover_temps

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    temp = elsewhere / ".data.npz.4000000.abc.tmp"
    temp.write_bytes(b"x")
    os.utime(temp, (0, 0))
    (tmp_path / "golden").symlink_to(elsewhere, target_is_directory=True)
    assert leftover_temps(tmp_path / "golden") == []
    assert remove_leftover_temps(tmp_path / "golden", tmp_path) == ([], []) and temp.exists()
    assert leftover_temps(elsewhere) == [temp]  # the same file, in a real golden dir, is a leftover
