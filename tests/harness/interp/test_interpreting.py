"""Which lane a kernel runs on: ``harness.arch.interpreting()`` reads ``TRITON_INTERPRET`` by Triton's own rule,
and the kernels' interpreter-only workarounds follow the kernel object (``kernels._interpreter``), so
``TRITON_INTERPRET=false`` never switches them on for a GPU kernel."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.arch import detect_arch, interpreting

# Spellings people write, and near misses: Triton's getenv_bool lowercases and compares, it does not strip.
ENV_VALUES = ["1", "true", "True", "TRUE", "yes", "YES", "on", "On", "y", "Y", "0", "false", "False", "",
              "off", "no", "n", "2", "01", " 1", "1 ", "t", "enable"]


@pytest.mark.parametrize("value", ENV_VALUES)
def test_interpreting_reads_the_variable_as_triton_does(monkeypatch, value):
    from triton import knobs

    monkeypatch.setenv("TRITON_INTERPRET", value)
    assert interpreting() is knobs.runtime.interpret, f"TRITON_INTERPRET={value!r}"


def test_interpreting_is_read_at_every_call(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert interpreting() is False
    monkeypatch.setenv("TRITON_INTERPRET", "false")
    assert interpreting() is False and detect_arch().name != "interp"
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert interpreting() is True and detect_arch().name == "interp"


def _jit_and_interpreted():
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    def probe(x_ptr):
        tl.store(x_ptr, 1)

    return JITFunction(probe), InterpretedFunction(probe)


def test_runs_on_interpreter_asks_the_kernel_object():
    from kernels._interpreter import runs_on_interpreter

    jit, interp = _jit_and_interpreted()
    assert runs_on_interpreter(interp) is True
    assert runs_on_interpreter(jit) is False
    assert runs_on_interpreter(jit.fn) is False  # the plain Python function


@pytest.mark.interp_only
def test_qsa_workarounds_are_on_for_interpreted_kernels():
    """The other half of the next test: on this lane the kernels are interpreted and the workarounds apply. The
    logits kernel has none (its bf16 dot operands were upcast to fp32 here until the harness's tl.dot shim made
    the interpreter's bf16 dot the GPU's): it launches as on the GPU."""
    from kernels.qsa import cache, logits

    seen = _launched(cache.normalize_query, logits)
    assert seen == {"_norm_cast_kernel": {"EMULATE_ROUND": True}, "_paged_logits_kernel": {}}


def _launched(normalize_query, logits):
    """What the QSA launchers pass for their interpreter-only constexprs, captured at the launch (which is
    then stopped: no kernel runs). Run in this process on interpreted kernels, or in the child below."""
    import torch

    from kernels.qsa import IndexerConfig, IndexerKVCache

    seen = {}

    class Stop(Exception):
        pass

    def capture(self, *args, grid, warmup, **kwargs):
        seen[self.fn.__name__] = {k: kwargs[k] for k in ("EMULATE_ROUND", "UPCAST") if k in kwargs}
        raise Stop

    from kernels import _launch

    classes = {type(logits._paged_logits_kernel)}
    saved = {c: c.__dict__["run"] for c in classes}
    enabled = _launch.ENABLED
    _launch.ENABLED = False  # the QSA launch cache asks torch.cuda for the device before run: plain launches here
    try:
        for c in classes:
            c.run = capture
        with pytest.raises(Stop):
            normalize_query(torch.ones(2, 1, 64), torch.zeros(64), eps=1e-6, dtype=torch.float8_e4m3fn)
        cfg = IndexerConfig(num_heads=1, head_dim=64, compress_ratio=1, token_topk=4, page_size=4,
                            indexer_kv_dtype="bf16")
        kv_cache = IndexerKVCache.empty(cfg, 2)
        with pytest.raises(Stop):
            logits.paged_logits(kv_cache, torch.ones(1, 1, 64, dtype=torch.bfloat16), torch.zeros(1, 2,
                                dtype=torch.int32), torch.zeros(1, dtype=torch.int32), torch.ones(1, dtype=torch.int32))
    finally:
        _launch.ENABLED = enabled
        for c, run in saved.items():
            c.run = run
    return seen


_CHILD = """
import sys
sys.path.insert(0, {tests!r})
from test_interpreting import _launched
from kernels.qsa import cache, logits
print(type(cache._norm_cast_kernel).__name__, _launched(cache.normalize_query, logits))
"""


@pytest.mark.lane_independent  # a child process whose launches are captured and stopped: no device
def test_triton_interpret_false_leaves_qsa_emulation_off(tmp_path):
    """``TRITON_INTERPRET=false`` on a GPU box: Triton makes GPU kernels, so the explicit FP8 rounding (an
    interpreter workaround) must stay off. A child process, because ``@triton.jit``
    decides at import; its launches are captured and stopped, so no GPU is needed."""
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "TRITON_INTERPRET": "false",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    child = _CHILD.format(tests=str(Path(__file__).resolve().parent))
    p = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, env=env, timeout=300,
                       cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == (
        "JITFunction {'_norm_cast_kernel': {'EMULATE_ROUND': False}, '_paged_logits_kernel': {}}"
    )
