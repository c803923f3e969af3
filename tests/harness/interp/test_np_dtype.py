"""The interpreter's storage type per Triton type, answered from memory (:mod:`harness.interp.np_dtype`): the
same answer as Triton's own function for every type it knows, and the same error for one it does not."""

from __future__ import annotations

import pytest

from harness.interp import np_dtype
from harness.interp.patch import Patch, installed, lift

pytestmark = pytest.mark.interp_only

tl = pytest.importorskip("triton.language")
itp = pytest.importorskip("triton.runtime.interpreter")

_SCALARS = ["int1", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
            "bfloat16", "float32", "float64", "float8e5", "float8e4nv", "float8e4b15", "float8e5b16", "float8e4b8"]


def _types():
    out = []
    for name in _SCALARS:
        t = getattr(tl, name, None)
        if t is None:
            continue
        out += [t, tl.block_type(t, [4]), tl.block_type(t, [2, 8]), tl.pointer_type(t),
                tl.block_type(tl.pointer_type(t), [16])]
    return out


def test_the_session_installs_it_and_it_answers_as_triton_does():
    assert installed(itp, "_get_np_dtype", np_dtype.TAG)
    types = _types()
    assert len(types) >= 5 * 16
    mine = [itp._get_np_dtype(t) for t in types]
    again = [itp._get_np_dtype(t) for t in types]  # from memory now
    with lift(np_dtype.TAG):
        theirs = [itp._get_np_dtype(t) for t in types]
    assert mine == theirs and again == theirs
    # a block of a type answers with its element's storage, a pointer (or a block of them) with uint64
    assert itp._get_np_dtype(tl.block_type(tl.bfloat16, [4])) == itp._get_np_dtype(tl.uint16)
    assert itp._get_np_dtype(tl.block_type(tl.pointer_type(tl.float32), [4])).name == "uint64"


def test_a_type_without_storage_raises_as_triton_does_every_time():
    void = tl.void
    with lift(np_dtype.TAG), pytest.raises(KeyError) as theirs:
        itp._get_np_dtype(void)
    for _ in range(2):  # nothing kept for it
        with pytest.raises(KeyError) as mine:
            itp._get_np_dtype(void)
        assert str(mine.value) == str(theirs.value)


def test_install_twice_patches_once_and_refuses_a_different_function():
    assert np_dtype.install(Patch()) is False  # the session's is in place
    with lift(np_dtype.TAG), Patch.context() as p:
        p.setattr(itp, "_get_np_dtype", lambda tt_dtype: None, tag="test")
        assert np_dtype.install(p) is False  # not Triton's body: left alone
