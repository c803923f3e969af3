"""harness.interp.jit: importing the harness patches nothing in Triton; the interpreter leak fix is applied
explicitly (by the plugin for a session on the interpreter lane) and removed again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.interp.jit import fix_interpreter_leak, language_patched
from harness.interp.patch import Patch

# Run in a fresh process: this one has the plugin's fix in place already. The snapshot covers what the
# harness patches anywhere (the interpreter's classes and module, JITFunction, triton.language).
_CHILD = r"""
import sys
import triton, triton.language as tl
from triton.runtime import interpreter as itp, jit

def snapshot():
    spaces = {"interpreter": vars(itp), "InterpretedFunction": vars(itp.InterpretedFunction),
              "JITFunction": vars(jit.JITFunction), "triton.language": vars(tl)}
    return {name: dict(ns) for name, ns in spaces.items()}

before = snapshot()
import harness.compile.matrix, harness.compile.cache, harness.compile.signature, harness.compile.errors
import harness.interp.jit, harness.compile.targets, harness.compile.launches, harness.plugin, harness.compile
import harness.golden, harness.interp, harness.interp.casts
after = snapshot()
changed = sorted(f"{name}.{k}" for name in before for k in set(before[name]) | set(after[name])
                 if before[name].get(k) is not after[name].get(k))
print("changed on import:", changed)

from harness.interp.jit import fix_interpreter_leak
from harness.interp.patch import Patch
original = itp.InterpretedFunction.__call__
with Patch.context() as patch:
    fixed = fix_interpreter_leak(patch)
    print("fixed:", fixed and itp.InterpretedFunction.__call__ is not original, fix_interpreter_leak(patch) is False)
print("unfixed:", itp.InterpretedFunction.__call__ is original)

import pytest
rc = pytest.main(["-q", "-p", "no:cacheprovider", "--harness-lane=interp", "-o", "addopts=", sys.argv[1]])
print("session:", int(rc), "after:", itp.InterpretedFunction.__call__ is original)
"""

_SESSION_TEST = """
from triton.runtime import interpreter as itp
from harness.interp.jit import LEAK_TAG
from harness.interp.patch import installed

def test_fix_in_place():
    assert installed(itp.InterpretedFunction, "__call__", LEAK_TAG)
"""


@pytest.mark.lane_independent  # an interpreter-lane session in a child: no device
def test_importing_the_harness_patches_nothing_and_the_fix_is_explicit(tmp_path):
    test_file = tmp_path / "test_in_session.py"
    test_file.write_text(_SESSION_TEST)
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    env.pop("TRITON_INTERPRET", None)
    p = subprocess.run([sys.executable, "-c", _CHILD, str(test_file)], capture_output=True, text=True, env=env,
                       timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = [ln for ln in p.stdout.splitlines() if ln.split(":")[0] in ("changed on import", "fixed", "unfixed",
                                                                        "session")]
    assert lines == ["changed on import: []", "fixed: True True", "unfixed: True", "session: 0 after: True"], (
        p.stdout[-3000:])


@pytest.mark.interp_only
def test_the_session_has_the_fix_in_place():
    """The plugin applied it at session start (so a second fix is a no-op) and the language is clean."""
    with Patch.context() as patch:
        assert fix_interpreter_leak(patch) is False
    assert not language_patched()


# --- Triton 3.6's scalar __index__ under NumPy 2 ---------------------------------------------------------------

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


@triton.jit
def _runtime_loop(x_ptr, o_ptr, K, BK: tl.constexpr):
    acc = tl.zeros((BK,), dtype=tl.float32)
    for k0 in range(0, K, BK):  # K is a runtime int: the interpreter calls its __index__
        acc += tl.load(x_ptr + k0 + tl.arange(0, BK))
    tl.store(o_ptr + tl.arange(0, BK), acc)


@pytest.mark.interp_only
def test_a_loop_over_a_runtime_int_runs_on_the_interpreter():
    """Triton 3.6's interpreter took int() of a 1-element array for a scalar's __index__, which NumPy 2 refuses:
    every kernel looping over a runtime K failed on the 3.6 lane (3.9 squeezes). The session's fix makes it run;
    the loop's sum is checked so a fix that skips iterations fails too."""
    import torch

    x = torch.arange(96, dtype=torch.float32)
    out = torch.empty(32)
    _runtime_loop[(1,)](x, out, 96, BK=32)
    assert torch.equal(out, x.view(3, 32).sum(0))


def test_the_index_fix_applies_only_where_triton_does_not_squeeze():
    from triton.runtime import interpreter as itp

    from harness.interp.jit import SQUEEZES_SCALAR_INDEX, fix_scalar_index

    current = itp._patch_lang_tensor
    with Patch.context() as patch:
        if getattr(current, SQUEEZES_SCALAR_INDEX, False):  # Triton 3.6, interpreter lane: the plugin's fix
            assert fix_scalar_index(patch) is False  # an outer fix is never stacked
        elif "squeeze()" in __import__("inspect").getsource(current):  # a Triton that squeezes already (3.9)
            assert fix_scalar_index(patch) is False and itp._patch_lang_tensor is current
        else:  # Triton 3.6 in a session that installed no fix (the GPU lane): fixing installs one, once
            assert fix_scalar_index(patch) and getattr(itp._patch_lang_tensor, SQUEEZES_SCALAR_INDEX, False)
            assert fix_scalar_index(patch) is False
    assert itp._patch_lang_tensor is current  # undoing the layer restores Triton's own
