"""What launch capture costs an adopter: an adopter-like suite written to a temp dir, run plain, with capture cold
and warm, serial and ``-n 2``; a table of wall and CPU time, compile counts and the x-plain ratios.

Why a suite of its own, outside the checkout: capture's cost depends on what the kernels look like (autotuned
kernels with a dozen configs, FP8 outputs, flags a launcher sets), and a repo of our own making under-counted it
(issue 40). The kernels below are written here in the style of public ones (an SGLang-like per-token group FP8
quant, a Hopper-style MoE group quant autotuned over 12 configs, torchao-like jagged row-wise scales autotuned
over 12, an MX downcast with a ``tl.static_assert`` guard, a KV store whose launcher memoizes its FP8 format per
device, an autotuned FP8 GEMM); no public code is copied.

Cold: empty ``$HARNESS_COMPILE_CACHE`` and ``$TRITON_CACHE_DIR``; warm: the same directories again. The plain suite
has a cold and a warm state too (the interpreter lane compiles each launch for sm90 once, for the lowering shim,
``harness.interp.lowering``, and keeps the facts in the same cache): each capture run is compared with the plain
run of the same state, and cold capture with warm plain as well. CPU time is user + sys of the pytest process and
its children (xdist workers and their compiles included).

    python benchmarks/bench_capture.py                  # every run
    python benchmarks/bench_capture.py --runs plain,cold,warm --timeout 900 -- --harness-widen-targets=sm80,sm90
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

KERNELS: dict[str, str] = {
    "fp8_quant.py": '''
        """Per-token group FP8 quantization, the way serving stacks write it: one program per group of a row."""
        import torch
        import triton
        import triton.language as tl


        @triton.jit
        def _per_token_group_quant_fp8(y_ptr, y_q_ptr, y_s_ptr, group_size, y_num_columns, eps, fp8_min, fp8_max,
                                       SCALE_UE8M0: tl.constexpr, BLOCK: tl.constexpr):
            g_id = tl.program_id(0)
            groups_per_row = y_num_columns // group_size
            row = g_id // groups_per_row
            col0 = (g_id % groups_per_row) * group_size
            cols = tl.arange(0, BLOCK)
            mask = cols < group_size
            y = tl.load(y_ptr + row * y_num_columns + col0 + cols, mask=mask, other=0.0).to(tl.float32)
            absmax = tl.maximum(tl.max(tl.abs(y)), eps)
            y_s = absmax / fp8_max
            if SCALE_UE8M0:
                y_s = tl.exp2(tl.ceil(tl.log2(tl.abs(y_s))))
            y_q = tl.clamp(y / y_s, fp8_min, fp8_max).to(y_q_ptr.dtype.element_ty)
            tl.store(y_q_ptr + row * y_num_columns + col0 + cols, y_q, mask=mask)
            tl.store(y_s_ptr + g_id, y_s)


        @triton.jit
        def _static_quant_fp8(x_ptr, out_ptr, scale_ptr, n, fp8_max, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
            inv = 1.0 / tl.load(scale_ptr)
            q = tl.clamp(x * inv, -fp8_max, fp8_max)
            tl.store(out_ptr + offs, q.to(out_ptr.dtype.element_ty), mask=offs < n)


        def per_token_group_quant_fp8(x, group_size, dtype=torch.float8_e4m3fn, scale_ue8m0=False):
            info = torch.finfo(dtype)
            q = torch.empty_like(x, dtype=dtype)
            s = torch.empty(x.numel() // group_size, dtype=torch.float32, device=x.device)
            _per_token_group_quant_fp8[(x.numel() // group_size,)](
                x, q, s, group_size, x.shape[-1], 1e-10, info.min, info.max, SCALE_UE8M0=scale_ue8m0,
                BLOCK=triton.next_power_of_2(group_size))
            return q, s.view(*x.shape[:-1], x.shape[-1] // group_size)


        def static_quant_fp8(x, scale, dtype=torch.float8_e4m3fn):
            out = torch.empty_like(x, dtype=dtype)
            _static_quant_fp8[(triton.cdiv(x.numel(), 256),)](x, out, scale, x.numel(), torch.finfo(dtype).max,
                                                                BLOCK=256)
            return out
    ''',
    "moe_quant.py": '''
        """Grouped per-expert FP8 quantization of MoE activations, tuned over block rows, warps and stages."""
        import torch
        import triton
        import triton.language as tl


        @triton.autotune(
            configs=[triton.Config({"BLOCK_M": m}, num_warps=w, num_stages=s)
                     for m in (1, 2, 4) for w in (4, 8) for s in (2, 3)],
            key=["hidden", "GROUP"],
        )
        @triton.jit
        def _moe_group_quant(x_ptr, q_ptr, s_ptr, M, hidden, eps, fp8_max, GROUP: tl.constexpr,
                             BLOCK_M: tl.constexpr, USE_UE8M0: tl.constexpr):
            pid_m = tl.program_id(0)
            pid_g = tl.program_id(1)
            rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            cols = pid_g * GROUP + tl.arange(0, GROUP)
            mask = (rows[:, None] < M) & (cols[None, :] < hidden)
            x = tl.load(x_ptr + rows[:, None] * hidden + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            amax = tl.maximum(tl.max(tl.abs(x), axis=1), eps)
            scale = amax / fp8_max
            if USE_UE8M0:
                scale = tl.exp2(tl.ceil(tl.log2(scale)))
            q = (x / scale[:, None]).to(q_ptr.dtype.element_ty)
            tl.store(q_ptr + rows[:, None] * hidden + cols[None, :], q, mask=mask)
            tl.store(s_ptr + rows * (hidden // GROUP) + pid_g, scale, mask=rows < M)


        def moe_group_quant(x, group=128, ue8m0=False, dtype=torch.float8_e4m3fn):
            M, hidden = x.shape
            q = torch.empty_like(x, dtype=dtype)
            s = torch.empty(M, hidden // group, dtype=torch.float32, device=x.device)
            grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), hidden // group)  # noqa: E731
            _moe_group_quant[grid](x, q, s, M, hidden, 1e-10, torch.finfo(dtype).max, GROUP=group,
                                   USE_UE8M0=ue8m0)
            return q, s
    ''',
    "jagged_scales.py": '''
        """Row-wise FP8 scales over a jagged batch (groups of rows delimited by offsets), tuned over tiles."""
        import torch
        import triton
        import triton.language as tl


        @triton.autotune(
            configs=[triton.Config({"BLOCK_ROWS": r, "BLOCK_COLS": c}, num_warps=w)
                     for r in (16, 32, 64) for c in (32, 64) for w in (4, 8)],
            key=["K"],
        )
        @triton.jit
        def _jagged_rowwise_scales(x_ptr, offs_ptr, scales_ptr, K, fp8_max, eps, input_dtype: tl.constexpr,
                                   BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr, ROUND_POW2: tl.constexpr):
            g = tl.program_id(0)
            start = tl.load(offs_ptr + g)
            end = tl.load(offs_ptr + g + 1)
            rows = start + tl.arange(0, BLOCK_ROWS)
            amax = tl.zeros([BLOCK_ROWS], dtype=tl.float32)
            for k0 in range(0, K, BLOCK_COLS):
                cols = k0 + tl.arange(0, BLOCK_COLS)
                m = (rows[:, None] < end) & (cols[None, :] < K)
                x = tl.load(x_ptr + rows[:, None] * K + cols[None, :], mask=m, other=0.0).to(input_dtype)
                amax = tl.maximum(amax, tl.max(tl.abs(x.to(tl.float32)), axis=1))
            scale = fp8_max / tl.maximum(amax, eps)
            if ROUND_POW2:
                scale = tl.exp2(tl.floor(tl.log2(scale)))
            tl.store(scales_ptr + rows, scale, mask=rows < end)


        def jagged_rowwise_scales(x, offsets, round_pow2=False):
            K = x.shape[1]
            scales = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
            dt = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32}[x.dtype]
            _jagged_rowwise_scales[(offsets.numel() - 1,)](x, offsets, scales, K, 448.0, 1e-12, input_dtype=dt,
                                                           ROUND_POW2=round_pow2)
            return scales
    ''',
    "mx_downcast.py": '''
        """MXFP8 downcast: 32-element blocks sharing a power-of-two (e8m0) scale; the element type is the output's."""
        import torch
        import triton
        import triton.language as tl


        @triton.jit
        def _downcast_to_mxfp8(mx_ptr, scale_ptr, src_ptr, outer, quant, BLOCK_OUTER: tl.constexpr,
                               BLOCK_QUANT: tl.constexpr):
            mx_dtype: tl.constexpr = mx_ptr.dtype.element_ty
            tl.static_assert(mx_dtype == tl.float8e4nv or mx_dtype == tl.float8e5,
                             f"Invalid mx_tensor_dtype {mx_dtype}")
            tl.static_assert(BLOCK_QUANT % 32 == 0, "BLOCK_QUANT must be a multiple of the MX block (32)")
            max_val: tl.constexpr = 448.0 if mx_dtype == tl.float8e4nv else 57344.0
            po = tl.program_id(0) * BLOCK_OUTER + tl.arange(0, BLOCK_OUTER)
            pq = tl.program_id(1) * BLOCK_QUANT + tl.arange(0, BLOCK_QUANT)
            m = (po[:, None] < outer) & (pq[None, :] < quant)
            x = tl.load(src_ptr + po[:, None] * quant + pq[None, :], mask=m, other=0.0).to(tl.float32)
            xb = tl.reshape(x, [BLOCK_OUTER, BLOCK_QUANT // 32, 32])
            amax = tl.max(tl.abs(xb), axis=2)
            e = tl.ceil(tl.log2(tl.maximum(amax, 1e-30) / max_val))
            e = tl.clamp(e, -127.0, 127.0)
            q = (xb / tl.exp2(e)[:, :, None]).to(mx_dtype)
            tl.store(mx_ptr + po[:, None] * quant + pq[None, :], tl.reshape(q, [BLOCK_OUTER, BLOCK_QUANT]), mask=m)
            so = tl.program_id(1) * (BLOCK_QUANT // 32) + tl.arange(0, BLOCK_QUANT // 32)
            sm = (po[:, None] < outer) & (so[None, :] < quant // 32)
            tl.store(scale_ptr + po[:, None] * (quant // 32) + so[None, :], (e + 127.0).to(tl.uint8), mask=sm)


        def downcast_to_mxfp8(x, dtype=torch.float8_e4m3fn):
            outer, quant = x.shape
            out = torch.empty_like(x, dtype=dtype)
            scales = torch.empty(outer, quant // 32, dtype=torch.uint8, device=x.device)
            _downcast_to_mxfp8[(triton.cdiv(outer, 4), triton.cdiv(quant, 64))](
                out, scales, x, outer, quant, BLOCK_OUTER=4, BLOCK_QUANT=64)
            return out, scales
    ''',
    "kv_store.py": '''
        """A paged KV-cache store in FP8; the launcher picks the format per device once (memoized), as serving
        stacks do. Pre-sm89 GPUs take e4b15, whose conversion only exists from fp16/fp32."""
        import torch
        import triton
        import triton.language as tl

        _E4B15: dict = {}


        def _use_e4b15(device) -> bool:
            if device not in _E4B15:
                _E4B15[device] = torch.cuda.is_available() and torch.cuda.get_device_capability() < (8, 9)
            return _E4B15[device]


        @triton.jit
        def _store_kv(key_ptr, value_ptr, k_cache_ptr, v_cache_ptr, slot_ptr, head_size, FP8: tl.constexpr,
                      E4B15: tl.constexpr, BLOCK: tl.constexpr):
            tok = tl.program_id(0)
            slot = tl.load(slot_ptr + tok)
            d = tl.arange(0, BLOCK)
            m = d < head_size
            k = tl.load(key_ptr + tok * head_size + d, mask=m, other=0.0)
            v = tl.load(value_ptr + tok * head_size + d, mask=m, other=0.0)
            if E4B15:
                k = k.to(tl.float32)
                v = v.to(tl.float32)
            tl.store(k_cache_ptr + slot * head_size + d, k.to(FP8).to(tl.uint8, bitcast=True), mask=m)
            tl.store(v_cache_ptr + slot * head_size + d, v.to(FP8).to(tl.uint8, bitcast=True), mask=m)


        def store_kv(key, value, k_cache, v_cache, slots):
            e4b15 = _use_e4b15(key.device)
            n, head_size = key.shape
            _store_kv[(n,)](key, value, k_cache, v_cache, slots, head_size,
                            FP8=tl.float8e4b15 if e4b15 else tl.float8e4nv, E4B15=e4b15,
                            BLOCK=triton.next_power_of_2(head_size))
    ''',
    "fp8_gemm.py": '''
        """FP8 GEMM with a per-token scale for A and a per-channel scale for B, tuned over tiles."""
        import torch
        import triton
        import triton.language as tl


        @triton.autotune(
            configs=[triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, num_warps=4, num_stages=s)
                     for bm, bn in ((16, 32), (32, 32)) for bk in (32, 64) for s in (2, 3)],
            key=["N", "K"],
        )
        @triton.jit
        def _scaled_mm(a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr):
            pid_m = tl.program_id(0)
            pid_n = tl.program_id(1)
            rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            for k0 in range(0, K, BLOCK_K):
                rk = k0 + tl.arange(0, BLOCK_K)
                a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K),
                            other=0.0)
                b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N),
                            other=0.0)
                acc = tl.dot(a, b, acc)
            sa = tl.load(as_ptr + rm, mask=rm < M, other=0.0)
            sb = tl.load(bs_ptr + rn, mask=rn < N, other=0.0)
            c = acc * sa[:, None] * sb[None, :]
            tl.store(c_ptr + rm[:, None] * N + rn[None, :], c.to(c_ptr.dtype.element_ty),
                     mask=(rm[:, None] < M) & (rn[None, :] < N))


        def scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16):
            M, K = a.shape
            N = b.shape[1]
            c = torch.empty(M, N, dtype=out_dtype, device=a.device)
            grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))  # noqa: E731
            _scaled_mm[grid](a, b, c, scale_a, scale_b, M, N, K)
            return c
    ''',
}

TESTS: dict[str, str] = {
    "test_fp8_quant.py": '''
        import pytest
        import torch

        from fp8_quant import per_token_group_quant_fp8, static_quant_fp8


        @pytest.mark.parametrize("rows,cols,group", [(4, 128, 64), (8, 256, 128), (2, 64, 32), (3, 512, 128)])
        @pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
        def test_group_quant(rows, cols, group, dtype):
            x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(0)).to(dtype)
            q, s = per_token_group_quant_fp8(x, group)
            ref = x.float().view(rows, cols // group, group)
            ref_s = ref.abs().amax(-1).clamp(min=1e-10) / 448.0
            torch.testing.assert_close(s, ref_s)
            back = q.float().view(rows, cols // group, group) * s[..., None]
            torch.testing.assert_close(back, ref, rtol=0.07, atol=1e-3)


        def test_group_quant_ue8m0():
            x = torch.randn(4, 128, generator=torch.Generator().manual_seed(1)).half()
            _, s = per_token_group_quant_fp8(x, 64, scale_ue8m0=True)
            assert torch.equal(s, torch.exp2(torch.log2(s).round()))


        @pytest.mark.parametrize("n", [100, 1000])
        def test_static_quant(n):
            x = torch.randn(n, generator=torch.Generator().manual_seed(2)).half()
            scale = torch.tensor([0.01])
            q = static_quant_fp8(x, scale)
            torch.testing.assert_close(q.float() * 0.01, x.float(), rtol=0.07, atol=1e-3)
    ''',
    "test_moe_quant.py": '''
        import pytest
        import torch

        from moe_quant import moe_group_quant


        @pytest.mark.parametrize("M", [3, 8])
        @pytest.mark.parametrize("hidden", [256, 512])
        def test_moe_group_quant(M, hidden):
            x = torch.randn(M, hidden, generator=torch.Generator().manual_seed(M)).half()
            q, s = moe_group_quant(x)
            ref_s = x.float().view(M, hidden // 128, 128).abs().amax(-1) / 448.0
            torch.testing.assert_close(s, ref_s)
            torch.testing.assert_close(q.float().view(M, -1, 128) * s[..., None], x.float().view(M, -1, 128),
                                       rtol=0.07, atol=1e-3)


        def test_moe_group_quant_ue8m0():
            x = torch.randn(4, 256, generator=torch.Generator().manual_seed(5)).half()
            _, s = moe_group_quant(x, ue8m0=True)
            assert torch.equal(s, torch.exp2(torch.log2(s).round()))
    ''',
    "test_jagged_scales.py": '''
        import pytest
        import torch

        from jagged_scales import jagged_rowwise_scales


        @pytest.mark.parametrize("sizes", [(3, 5), (8, 1, 4), (16,)])
        @pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
        def test_jagged_scales(sizes, dtype):
            x = torch.randn(sum(sizes), 96, generator=torch.Generator().manual_seed(len(sizes))).to(dtype)
            offs = torch.tensor([0, *torch.tensor(sizes).cumsum(0).tolist()], dtype=torch.int32)
            s = jagged_rowwise_scales(x, offs)
            torch.testing.assert_close(s, 448.0 / x.float().abs().amax(1).clamp(min=1e-12))
    ''',
    "test_mx_downcast.py": '''
        import pytest
        import torch

        from mx_downcast import downcast_to_mxfp8


        @pytest.mark.parametrize("shape", [(4, 64), (8, 128)])
        @pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
        def test_downcast(shape, dtype):
            x = torch.randn(*shape, generator=torch.Generator().manual_seed(3)).half()
            q, s = downcast_to_mxfp8(x, dtype)
            scale = torch.exp2(s.float() - 127.0).repeat_interleave(32, dim=1)
            torch.testing.assert_close(q.float() * scale, x.float(), rtol=0.25, atol=1e-2)
    ''',
    "test_kv_store.py": '''
        import pytest
        import torch

        from kv_store import store_kv


        @pytest.mark.parametrize("tokens,head", [(4, 64), (7, 128), (2, 80)])
        def test_store_fp16(tokens, head):
            g = torch.Generator().manual_seed(tokens)
            k, v = torch.randn(tokens, head, generator=g).half(), torch.randn(tokens, head, generator=g).half()
            kc = torch.zeros(16, head, dtype=torch.uint8)
            vc = torch.zeros(16, head, dtype=torch.uint8)
            slots = torch.randperm(16, generator=g)[:tokens]
            store_kv(k, v, kc, vc, slots)
            got = kc[slots].view(torch.float8_e4m3fn).float()
            torch.testing.assert_close(got, k.float().to(torch.float8_e4m3fn).float())
    ''',
    "test_fp8_gemm.py": '''
        import pytest
        import torch

        from fp8_gemm import scaled_mm


        @pytest.mark.parametrize("M,N,K", [(16, 32, 64), (24, 64, 128)])
        def test_scaled_mm(M, N, K):
            g = torch.Generator().manual_seed(M)
            a = torch.randn(M, K, generator=g).to(torch.float8_e4m3fn)
            b = torch.randn(K, N, generator=g).to(torch.float8_e4m3fn)
            sa, sb = torch.rand(M, generator=g) + 0.5, torch.rand(N, generator=g) + 0.5
            c = scaled_mm(a, b, sa, sb)
            ref = (a.float() @ b.float()) * sa[:, None] * sb[None, :]
            torch.testing.assert_close(c.float(), ref, rtol=1e-2, atol=1e-2)
    ''',
}

CONFTEST = '''
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "src"))
'''

PYTEST_INI = '''
[pytest]
addopts = -p no:cacheprovider
'''


def write_suite(where: Path) -> Path:
    """The adopter suite under ``where``: ``src/`` kernels, ``tests/``, a conftest and a pytest.ini."""
    (where / "src").mkdir(parents=True)
    (where / "tests").mkdir()
    for name, text in KERNELS.items():
        (where / "src" / name).write_text(textwrap.dedent(text).lstrip())
    for name, text in TESTS.items():
        (where / "tests" / name).write_text(textwrap.dedent(text).lstrip())
    (where / "conftest.py").write_text(CONFTEST.lstrip())
    (where / "pytest.ini").write_text(PYTEST_INI.lstrip())
    return where


_TOTALS = re.compile(r"(\d+) distinct compiles: (\d+) compiled, (\d+) read from the disk cache")
_RESULT = re.compile(r"^=*\s*(\d+ (?:passed|failed|error).*?) in [\d.]+s", re.M)


def run_pytest(suite: Path, args: list[str], env: dict[str, str], timeout: float) -> dict[str, object]:
    """One pytest run in ``suite``: wall and CPU (user + sys of the children) seconds, the capture totals, the
    result line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-m", "pytest", "-q", *args], cwd=suite, env=env, capture_output=True,
                           text=True, timeout=timeout, start_new_session=True)
        out, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc = None
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    m = _TOTALS.search(out)
    res = _RESULT.findall(out)
    return {"wall": wall, "cpu": cpu, "rc": rc, "distinct": int(m.group(1)) if m else None,
            "compiled": int(m.group(2)) if m else None, "result": res[-1] if res else ("timeout" if rc is None
                                                                                        else "?"),
            "tail": out[-3000:]}


def _ratio(row: dict[str, object], base: dict[str, object] | None, what: str) -> str:
    return f"{float(row[what]) / float(base[what]):.2f}x" if base else "-"  # type: ignore[arg-type]


RUNS = ("plain", "plain-warm", "cold", "warm", "plain-n2", "plain-warm-n2", "cold-n2", "warm-n2")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated, from {', '.join(RUNS)}")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds one pytest run may take")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (suite and caches); print its path")
    p.add_argument("--json", type=Path, default=None, help="also write the rows here")
    p.add_argument("--show", action="store_true", help="print each capture run's pytest tail")
    p.add_argument("extra", nargs="*", help="pytest arguments added to the capture runs (after --)")
    a = p.parse_args(argv)
    runs = [r.strip() for r in a.runs.split(",") if r.strip()]
    bad = [r for r in runs if r not in RUNS]
    if bad:
        p.error(f"--runs: unknown {', '.join(bad)}; expected some of {', '.join(RUNS)}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-capture-"))
    suite = write_suite(tmp / "adopter")
    base_env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTEST_ADDOPTS")}
    base_env["PYTHONPATH"] = str(ROOT) + (os.pathsep + base_env["PYTHONPATH"] if base_env.get("PYTHONPATH") else "")
    rows: list[dict[str, object]] = []
    try:
        for name in runs:
            series = "n2" if name.endswith("-n2") else "serial"
            kind = name.split("-")[0]
            caches = tmp / f"caches-{'plain' if kind == 'plain' else 'capture'}-{series}"
            if name in ("plain", "plain-n2", "cold", "cold-n2"):
                shutil.rmtree(caches, ignore_errors=True)
            caches.mkdir(exist_ok=True)
            env = dict(base_env, HARNESS_COMPILE_CACHE=str(caches / "harness"), TRITON_CACHE_DIR=str(caches / "triton"))
            args = (["-n", "2"] if series == "n2" else ["-p", "no:xdist"]) + (
                ["--harness-compile-launches", *a.extra] if kind != "plain" else [])
            r = run_pytest(suite, args, env, a.timeout)
            r.update(run=name, args=" ".join(args))
            rows.append(r)
            print(f"{name:9s} wall {r['wall']:7.1f}s cpu {r['cpu']:7.1f}s compiles {r['distinct']}/{r['compiled']} "
                  f"{r['result']}", flush=True)
            if a.show and kind != "plain" or r["rc"] not in (0,):
                print(textwrap.indent(str(r["tail"])[-2500:], "    | "), flush=True)
    finally:
        if a.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    by_name = {str(r["run"]): r for r in rows}
    print()
    print("| run | wall | x plain (same caches) | x plain warm | CPU (user+sys) | x plain (same caches) | x plain warm "
          "| distinct compiles | compiled | result |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        name = str(r["run"])
        n2 = "-n2" if name.endswith("-n2") else ""
        same = by_name.get(("plain" if name.startswith(("plain", "cold")) and "warm" not in name else "plain-warm")
                           + n2)
        warm = by_name.get("plain-warm" + n2)

        print(f"| {name} | {r['wall']:.1f} s | {_ratio(r, same, 'wall')} | {_ratio(r, warm, 'wall')} | "
              f"{r['cpu']:.1f} s | {_ratio(r, same, 'cpu')} | {_ratio(r, warm, 'cpu')} | {r['distinct'] or '-'} | "
              f"{r['compiled'] if r['compiled'] is not None else '-'} | {r['result']} |")
    if a.json:
        a.json.write_text(json.dumps([{k: v for k, v in r.items() if k != "tail"} for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
