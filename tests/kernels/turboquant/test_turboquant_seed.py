"""Seed-bug regression: the store's key load must reach fp32 before the FP8 cast. Three ways:

(a) the compile matrix — the store kernel for sm75…sm120, every input dtype × key format (e4nv refused
    below sm89, with the compiler's message); the bug makes bf16 → e4b15 fail to compile everywhere;
(b) interpreter numerics — keys chosen where a direct cast and the fp32 path round differently;
(c) GPU numerics, including the forced-e4b15 (pre-Ada) path on the machine at hand.

``TQ_STORE_VARIANT=<file.py>`` swaps in another store kernel (same signature) for the whole module:
``test_turboquant_meta.py`` uses it to show these tests fail on the pre-fix kernel
(``known_bad/tq_store_prefix.py``, beside it).
"""

from __future__ import annotations

import functools
import importlib.util
import os

import pytest
import torch
from tq_casts import hw_casts

import kernels.turboquant.store as store
from harness.compare import assert_fp8_close
from harness.compile import matrix as cm
from harness.fp8 import encode
from kernels.turboquant import reference as ref
from kernels.turboquant import slot_bytes, tq_store_k8v4
from kernels.turboquant.layout import KEY_MAX

VARIANT_ENV = "TQ_STORE_VARIANT"
CASES = [(s, f) for s in ("fp16", "bf16", "fp32") for f in ("e4nv", "e4b15")]
E4NV_REFUSED = r"fp8e4nv not supported in this architecture"
HEAD_DIM = 128


@functools.cache
def _variant(path: str):
    spec = importlib.util.spec_from_file_location(f"_tq_variant_{abs(hash(path))}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod._store_k8v4_kernel


@pytest.fixture
def store_kernel(monkeypatch):
    """The store kernel under test: the shipped one, or the file named by ``TQ_STORE_VARIANT``."""
    path = os.environ.get(VARIANT_ENV)
    if path:
        monkeypatch.setattr(store, "_store_k8v4_kernel", _variant(path))
    return store._store_k8v4_kernel


# --- (a) compile matrix ----------------------------------------------------------------------------------


@pytest.mark.lane_independent  # AOT compiles: the same on every lane (the meta tests' inner runs still run it)
@pytest.mark.parametrize("src, fmt", CASES, ids=[f"{s}-{f}" for s, f in CASES])
def test_store_compiles_for_target(compile_target, src, fmt, store_kernel):
    sig, constexprs = store.store_compile_spec(src, fmt, head_dim=HEAD_DIM)
    if fmt == "e4nv" and compile_target.cc is not None and compile_target.cc < 89:
        cm.assert_compile_error(
            store_kernel, signature=sig, constexprs=constexprs, target=compile_target, match=E4NV_REFUSED
        )
        return
    (c,) = cm.assert_compiles(
        store_kernel, signature=sig, constexprs=constexprs, target=compile_target
    ).values()
    if fmt == "e4nv":  # sm89+: the hardware convert, saturating (no NaN from out-of-range keys)
        cm.assert_ptx_contains(c, r"cvt\.rn\.satfinite\.e4m3x2")
        cm.assert_ptx_lacks(c, r"cvt\.rn\.e4m3x2")


# --- (b) interpreter numerics ----------------------------------------------------------------------------

_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def _seed_keys(src: str, fmt: str, rng: torch.Generator, n: int = 2 * HEAD_DIM) -> torch.Tensor:
    """Up to half the keys where a direct cast from ``src`` and the fp32 path disagree in the interpreter
    (found with harness.fp8's interpreter model: 1912 fp16 inputs for e4nv, none for bf16), the rest random
    in range, negatives included — where the pre-fix kernel's bf16 range check goes wrong in the interpreter
    (a bf16 key compared with the bound there reads as out of range: -1 → 0x7e, +448). Shape
    ``[n // HEAD_DIM, 1, HEAD_DIM]``."""
    dt = _DTYPES[src]
    lim = KEY_MAX[fmt]
    rand = (torch.rand(n, generator=rng) * 2 - 1) * lim
    if dt == torch.float32:
        picked = rand[: n // 2]
    else:
        x = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(dt)
        x = x[torch.isfinite(x) & (x.float().abs() <= lim)]
        differ = encode(x, fmt, arch="interp") != encode(x.float(), fmt, arch="interp")
        cand = x[differ]
        idx = torch.linspace(0, cand.numel() - 1, n // 2).round().long()
        picked = cand[idx].float() if cand.numel() else rand[:0]
    return torch.cat([picked, rand[: n - picked.numel()]]).to(dt).reshape(-1, 1, HEAD_DIM)


def _store_keys(keys: torch.Tensor, fmt: str, device: str) -> torch.Tensor:
    """The key codes the store writes for ``keys``, through both store kernels, stacked: first as given
    (int64-aligned rows: ``_store_k8v4_words_kernel``), then from a copy one element off an 8-byte boundary
    (``_store_k8v4_kernel``, the kernel ``TQ_STORE_VARIANT`` swaps)."""
    t = keys.shape[0]
    slots = torch.arange(t, device=device) * 3
    out = []
    for shift in (0, 1):
        buf = torch.zeros(keys.numel() + shift, dtype=keys.dtype, device=device)
        k = buf[shift:].view(keys.shape)
        k.copy_(keys)
        assert store.src_words_ok(k) == (shift == 0)
        cache = torch.full((3 * t // 16 + 1, 16, 1, slot_bytes(HEAD_DIM)), 0xAA, dtype=torch.uint8, device=device)
        tq_store_k8v4(k, torch.zeros_like(keys).to(device), cache, slots, fp8_format=fmt)
        out.append(cache.cpu()[slots.cpu() // 16, slots.cpu() % 16, :, :HEAD_DIM])
    return torch.cat(out)


@pytest.mark.interp_only
@pytest.mark.dtype_cases(fmt=["e4nv", "e4b15"])
def test_seed_interp_numerics(dtype_case, store_kernel, rng, device, tolerance):
    fmt = dtype_case.fmt.name
    keys = _seed_keys(dtype_case.src_name, fmt, rng)
    got = _store_keys(keys, fmt, device)
    assert_fp8_close(
        got,
        torch.cat([ref.key_codes(keys, fmt, casts=hw_casts("interp"))] * 2),
        fmt,
        tol=tolerance("fp8_cast"),
        nan_equal=True,
        op="turboquant.seed_keys",
        dtype=dtype_case.id,
    )


# --- (c) GPU numerics, forced e4b15 included ----------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.dtype_cases(fmt=["e4nv", "e4b15"])
def test_seed_gpu_numerics(dtype_case, store_kernel, rng, device, harness_arch, tolerance):
    """On sm89+ GPUs the e4b15 cases are the forced pre-Ada path; with the seed bug bf16 ones do not build."""
    fmt = dtype_case.fmt.name
    lim = KEY_MAX[fmt]
    keys = torch.cat(
        [
            _seed_keys(dtype_case.src_name, fmt, rng).float().reshape(-1),
            (torch.rand(14 * HEAD_DIM, generator=rng) * 2 - 1) * lim * 1.25,
        ]
    ).to(dtype_case.src)
    keys = keys.reshape(-1, 1, HEAD_DIM)
    got = _store_keys(keys, fmt, device)
    assert_fp8_close(
        got,
        torch.cat([ref.key_codes(keys, fmt, casts=hw_casts(harness_arch))] * 2),
        fmt,
        tol=tolerance("fp8_cast"),
        nan_equal=True,
        op="turboquant.seed_keys",
        dtype=dtype_case.id,
    )
