"""``encode(arch="interp")`` reproduces the Triton interpreter's own FP8 casts, bit for bit.

The reference is a real ``@triton.jit`` cast run under ``TRITON_INTERPRET=1`` in a subprocess (the variable
is read when kernels are decorated, so it cannot be flipped inside this process). Every fp16/bf16 bit
pattern and a sample of fp32 bit patterns, cast directly and through ``.to(tl.float32)``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from harness import fp8
from harness.interp import arith as interp_arith
from harness.interp import casts as interp_casts

pytestmark = pytest.mark.lane_independent  # the same on every lane: the GPU lane skips it

FORMATS = ("e4nv", "e5m2", "e4b15")

_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import torch
    import triton
    import triton.language as tl

    from harness.cast_probe import fp8_cast as cast, upcast_fp32 as upcast

    src = np.load(sys.argv[1], allow_pickle=False)
    out = {}
    views = {"fp16": (torch.int16, torch.float16), "bf16": (torch.int16, torch.bfloat16),
             "fp32": (torch.int32, torch.float32)}
    for sname, (ity, fty) in views.items():
        x = torch.from_numpy(src[sname].copy()).view(fty)
        for fname, tname in (("e4nv", "float8e4nv"), ("e5m2", "float8e5"), ("e4b15", "float8e4b15")):
            for via in (0, 1):
                y = torch.empty(x.numel(), dtype=torch.uint8)
                block = triton.next_power_of_2(x.numel())
                cast[(1,)](x, y, x.numel(), getattr(tl, tname), bool(via), BLOCK=block)
                out[f"{sname}_{fname}_{via}"] = y.numpy()
        if sname != "fp32":
            y = torch.empty(x.numel(), dtype=torch.float32)
            upcast[(1,)](x, y, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
            out[f"{sname}_fp32_bits"] = y.view(torch.int32).numpy()
    np.savez(sys.argv[2], **out)
""")


def _fp32_bits() -> torch.Tensor:
    g = torch.Generator().manual_seed(7)
    rnd = torch.randint(-(2**31), 2**31 - 1, (1 << 14,), generator=g, dtype=torch.int64).to(torch.int32)
    spread = (
        (torch.rand(1 << 14, generator=g) + 1)
        * torch.exp2(torch.randint(-30, 20, (1 << 14,), generator=g).float())
    ).view(torch.int32)
    mids = []
    for name in FORMATS:
        v = fp8.decode(torch.arange(128, dtype=torch.int32).to(torch.uint8), name).double()
        v = v[torch.isfinite(v)].unique().sort().values
        mids.append(((v[1:] + v[:-1]) / 2).float().view(torch.int32))
    m = torch.cat(mids)
    return torch.cat([rnd, spread, m - 1, m, m + 1, (m.view(torch.float32).neg()).view(torch.int32)])


@pytest.fixture(scope="module")
def interpreter_casts(tmp_path_factory) -> tuple[dict[str, torch.Tensor], dict[str, np.ndarray]]:
    d = tmp_path_factory.mktemp("interp_fp8")
    bits16 = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    inputs = {
        "fp16": bits16.view(torch.float16),
        "bf16": bits16.view(torch.bfloat16),
        "fp32": _fp32_bits().view(torch.float32),
    }
    np.savez(
        d / "in.npz", fp16=bits16.numpy(), bf16=bits16.numpy(), fp32=inputs["fp32"].view(torch.int32).numpy()
    )
    (d / "child.py").write_text(_CHILD)
    env = dict(os.environ, TRITON_INTERPRET="1")
    r = subprocess.run(
        [sys.executable, str(d / "child.py"), str(d / "in.npz"), str(d / "out.npz")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parent,
    )
    assert r.returncode == 0, f"interpreter subprocess failed:\n{r.stdout}\n{r.stderr}"
    with np.load(d / "out.npz", allow_pickle=False) as z:
        return inputs, {k: z[k] for k in z.files}


@pytest.mark.parametrize("via", [False, True], ids=["direct", "via_fp32"])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("src", ["fp16", "bf16", "fp32"])
def test_encode_interp_matches_interpreter_kernel(interpreter_casts, src, fmt, via):
    inputs, casts = interpreter_casts
    x = inputs[src]
    want = casts[f"{src}_{fmt}_{int(via)}"]
    # the child runs without the plugin: model the interpreter's own casts and bf16 conversion
    with interp_casts.suspended(), interp_arith.suspended():
        got = fp8.encode(x, fmt, arch="interp", via=torch.float32 if via else None).numpy()
    bad = np.nonzero(got != want)[0]
    assert len(bad) == 0, f"{len(bad)} codes differ, e.g. " + ", ".join(
        f"x={x[i].item()!r}: encode 0x{got[i]:02x}, interpreter 0x{want[i]:02x}" for i in bad[:8]
    )


@pytest.mark.parametrize("src", ["fp16", "bf16"])
def test_upcast_interp_matches_interpreter_kernel(interpreter_casts, src):
    """Every bit pattern, inf and NaN payloads included: what ``encode(via=float32)`` builds on."""
    inputs, casts = interpreter_casts
    x = inputs[src]
    want = casts[f"{src}_fp32_bits"]
    with interp_casts.suspended(), interp_arith.suspended():
        got = fp8.upcast_fp32(x, arch="interp").view(torch.int32).numpy()
    bad = np.nonzero(got != want)[0]
    assert len(bad) == 0, f"{len(bad)} of {len(want)} differ, e.g. " + ", ".join(
        f"bits 0x{int(x[i : i + 1].view(torch.int16)) & 0xFFFF:04x}: upcast 0x{got[i] & 0xFFFFFFFF:08x}, "
        f"interpreter 0x{want[i] & 0xFFFFFFFF:08x}" for i in bad[:6]
    )


def test_interpreter_is_not_the_hardware(interpreter_casts):
    """Guards the premise: if Triton fixes its interpreter, the interp rows of the table can go."""
    inputs, casts = interpreter_casts
    hw = fp8.encode(inputs["fp16"], "e4nv", arch="sm90").numpy()
    assert (casts["fp16_e4nv_0"] != hw).sum() > 0
