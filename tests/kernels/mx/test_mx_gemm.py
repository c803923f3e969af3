"""scaled_gemm over quantize_fp4 outputs: against the float64 reference on the interpreter (MXFP4) and the GPU
(MXFP4, NVFP4), linear and swizzled scales; refusals are clear errors, pinned per (target, Triton, interpreter);
H200 goldens of the quantized operands and the product."""

from __future__ import annotations

import nvfp4_sm90
import pytest
import torch
from mx_inputs import activations

from harness import assert_close_tol
from harness.compile.launches import skip_compile

# scaled_gemm refuses GPUs below sm80 (kernels.mx.gemm_refusal), so launch capture never compiles it for sm75:
# there Triton falls back to an FMA dot, one launch 206 s of CPU on Triton 3.6 and 52 s on 3.9 (2-3 s on every
# other target; python -m harness compile --no-widen, fresh caches, 2026-12-05). By name: no kernel import here.
skip_compile("_scaled_gemm_kernel", "sm75", reason="scaled_gemm refuses GPUs below sm80 (gemm_refusal)")

GEMM_SHAPES = {"m37-n45-k160": (37, 45, 160), "m130-n67-k256": (130, 67, 256)}


def _operands(scheme, m, n, k, rng, device, layout="linear"):
    from kernels.mx import quantize_fp4
    from kernels.mx.reference import nvfp4_global_scale

    a, b = activations(m, k, rng, specials=False), activations(n, k, rng, specials=False)
    out = []
    for t in (a, b):
        g = nvfp4_global_scale(t).to(device) if scheme == "nvfp4" else None
        out.append(quantize_fp4(t.to(device), scheme, global_scale=g, layout=layout))
    return out


def _check(scheme, qa, qb, c, tolerance, linear=None):
    from kernels.mx.reference import dequantize_fp4, scaled_gemm_reference

    qa_l, qb_l = linear or (qa, qb)
    cpu = [tuple(t.cpu() for t in q) for q in (qa_l, qb_l)]
    want = scaled_gemm_reference(cpu[0], cpu[1], scheme)
    da = dequantize_fp4(cpu[0][0], cpu[0][1], scheme, cpu[0][2] if scheme == "nvfp4" else None)
    db = dequantize_fp4(cpu[1][0], cpu[1][1], scheme, cpu[1][2] if scheme == "nvfp4" else None)
    scale = da.abs() @ db.abs().T
    assert_close_tol(c.cpu().double(), want, tolerance("mx.gemm", dtype=scheme), scale=scale)


@pytest.mark.parametrize("layout", ["linear", "swizzled"])
@pytest.mark.parametrize("shape", list(GEMM_SHAPES))
@pytest.mark.parametrize("scheme", ["mxfp4", "nvfp4"])
def test_gemm_matches_the_float64_reference(scheme, shape, layout, rng, device, harness_lane, tolerance):
    from kernels._interpreter import runs_on_interpreter
    from kernels.mx import gemm_refusal, scaled_gemm
    from kernels.mx.gemm import _scaled_gemm_kernel

    m, n, k = GEMM_SHAPES[shape]
    cap = torch.cuda.get_device_capability() if harness_lane == "gpu" else None
    why = gemm_refusal(scheme, interpreter=runs_on_interpreter(_scaled_gemm_kernel), capability=cap)
    qa, qb = _operands(scheme, m, n, k, rng, device, layout)
    if why is not None:
        with pytest.raises(NotImplementedError, match=rf"scaled_gemm\({scheme}\): "):
            scaled_gemm(qa, qb, scheme, layout=layout)
        return
    c = scaled_gemm(qa, qb, scheme, layout=layout)
    linear = None
    if layout == "swizzled":
        from harness.mx import unswizzle_scales

        kb = k // (32 if scheme == "mxfp4" else 16)
        linear = tuple((q[0], unswizzle_scales(q[1].cpu(), q[0].shape[0], kb), *q[2:]) for q in (qa, qb))
    _check(scheme, qa, qb, c, tolerance, linear)


def test_refusals_are_pinned_per_target_version_and_interpreter():
    from kernels.mx import gemm_refusal

    assert gemm_refusal("mxfp4", interpreter=False, capability=(9, 0), version=(3, 6)) is None
    assert "PassManager::run failed" in gemm_refusal("nvfp4", interpreter=False, capability=(9, 0), version=(3, 6))
    assert gemm_refusal("nvfp4", interpreter=False, capability=(9, 0), version=(3, 9)) is None
    # sm89 emulates dot_scaled as sm90 does: Triton 3.6 refuses NVFP4 there too (compiled 2026-12-04), 3.9 not
    assert "PassManager::run failed" in gemm_refusal("nvfp4", interpreter=False, capability=(8, 9), version=(3, 6))
    assert gemm_refusal("nvfp4", interpreter=False, capability=(8, 9), version=(3, 9)) is None
    assert gemm_refusal("mxfp4", interpreter=False, capability=(8, 9), version=(3, 6)) is None
    assert gemm_refusal("nvfp4", interpreter=False, capability=(10, 0), version=(3, 6)) is None
    assert "lowers from sm89 on" in gemm_refusal("nvfp4", interpreter=False, capability=(8, 0), version=(3, 9))
    assert "sm80 and newer" in gemm_refusal("mxfp4", interpreter=False, capability=(7, 5), version=(3, 9))


def test_the_36_interpreter_runs_the_k_loop_only_with_the_scalar_index_fix(monkeypatch):
    """Triton 3.6's interpreter cannot run the K loop under NumPy 2 unless its launch patch squeezes a scalar's
    array (the harness's fix_scalar_index marks it so); 3.9's does by itself."""
    from triton.runtime import interpreter as interp

    from kernels.mx import gemm_refusal

    def plain(tensor, scope):
        pass

    def fixed(tensor, scope):
        pass

    fixed.squeezes_scalar_index = True
    monkeypatch.setattr(interp.InterpreterBuilder, "create_dot_scaled", lambda *a: None, raising=False)
    monkeypatch.setattr(interp, "_patch_lang_tensor", plain, raising=False)
    assert "cannot run the K loop" in gemm_refusal("mxfp4", interpreter=True, capability=None, version=(3, 6))
    assert gemm_refusal("mxfp4", interpreter=True, capability=None, version=(3, 9)) is None
    monkeypatch.setattr(interp, "_patch_lang_tensor", fixed, raising=False)
    assert gemm_refusal("mxfp4", interpreter=True, capability=None, version=(3, 6)) is None


@pytest.mark.interp_only
def test_nvfp4_on_the_interpreter_runs_only_where_its_scales_are_decoded_and_sm90_compiles_it():
    """The harness's shim decodes NVFP4's e4m3 scales (Triton's own interpreter reads them as e8m0); it imitates
    sm90, whose Triton 3.6 refuses NVFP4: so the product runs on the Triton 3.9 interpreter lane only."""
    from triton.runtime import interpreter as itp

    from kernels._versions import triton_version
    from kernels.mx import quantize_fp4, scaled_gemm

    g = torch.ones(1)
    q = quantize_fp4(torch.ones(4, 32), "nvfp4", global_scale=g)
    method = getattr(itp.InterpreterBuilder, "create_dot_scaled", None)
    if getattr(method, "decodes_scale_types", False) and triton_version() >= (3, 9):
        from kernels.mx.reference import scaled_gemm_reference

        # 32 products of 6 * 0.171875 (e4m3 0x23) squared: exact in fp32, and wrong if 0x23 were read as e8m0
        assert torch.equal(scaled_gemm(q, q, "nvfp4"), scaled_gemm_reference(q, q, "nvfp4").float())
    else:
        with pytest.raises(NotImplementedError, match=r"scaled_gemm\(nvfp4\): the Triton [\d.]+ interpreter"):
            scaled_gemm(q, q, "nvfp4")


def test_bad_operands_name_the_argument(device):
    from kernels.mx import quantize_fp4, scaled_gemm

    qa = quantize_fp4(torch.ones(4, 64, device=device))
    qb = quantize_fp4(torch.ones(5, 32, device=device))
    g = torch.ones(1, device=device)
    qn = quantize_fp4(torch.ones(4, 64, device=device), "nvfp4", global_scale=g)
    for call, err, text in [
        (lambda: scaled_gemm(qa, qb), ValueError, r"b: K = 32 but a has K = 64"),
        (lambda: scaled_gemm(qa[0], qa), TypeError, r"a: mxfp4 operands are \(codes, scales\)"),
        (lambda: scaled_gemm(qa, qa, "nvfp4"), TypeError, r"a: nvfp4 operands are \(codes, scales, global_scale\)"),
        (lambda: scaled_gemm(qa, qa, layout="swizzled"), ValueError, r"a: its swizzled scales must have shape"),
        (lambda: scaled_gemm(qa, (qa[0], qa[1].float())), TypeError, r"b: its scales must be a torch.uint8"),
        (lambda: scaled_gemm(qa, qa, out=torch.empty(4, 5, device=device)), ValueError,
         r"out: expected a float32 \(4, 4\)"),
        (lambda: scaled_gemm(qa, qa, "fp4"), ValueError, r"scheme: expected one of mxfp4, nvfp4"),
        (lambda: scaled_gemm((*qn[:2], qn[2].half()), qn, "nvfp4"), ValueError,
         r"global_scale: nvfp4 needs a one-element float32 tensor .*; got torch.float16 of shape \(\)"),
        (lambda: scaled_gemm((qa[0].reshape(-1), qa[1]), qa), ValueError,
         r"a: codes must be 2-D \(rows, K / 2\) with unit stride along K; got shape \(128,\)"),
        (lambda: scaled_gemm(qa, (qa[0].T.contiguous().T, qa[1])), ValueError,
         r"b: codes must be 2-D \(rows, K / 2\) with unit stride along K; got shape \(4, 32\), strides \(1, 4\)"),
    ]:
        with pytest.raises(err, match=text):
            call()


def _mxfp8(x, device, layout="linear"):
    """x as an MXFP8 e4m3 operand (harness.mx's encoding: OCP MX, floor scale rule)."""
    from harness.mx import quantize_mx, swizzle_scales

    codes, scales = quantize_mx(x.float().cpu(), torch.float8_e4m3fn)
    if layout == "swizzled":
        scales = swizzle_scales(scales)
    return codes.view(torch.float8_e4m3fn).to(device), scales.to(device)


@pytest.mark.parametrize("layout", ["linear", "swizzled"])
@pytest.mark.parametrize("shape", list(GEMM_SHAPES))
def test_e4m3_x_e2m1_gemm_matches_the_float64_reference(shape, layout, rng, device, harness_lane, harness_arch,
                                                       tolerance):
    """MXFP8 activations times MXFP4 weights (``a_format="e4m3"``). The interpreter imitating a GPU below sm89
    refuses the kernel's e4m3 operand as that GPU's compiler does (the harness's cast shim)."""
    from kernels._interpreter import runs_on_interpreter
    from kernels.mx import gemm_refusal, quantize_fp4, scaled_gemm
    from kernels.mx.gemm import _scaled_gemm_kernel
    from kernels.mx.reference import dequantize_fp4, dequantize_mxfp8, scaled_gemm_reference

    m, n, k = GEMM_SHAPES[shape]
    a, b = activations(m, k, rng, specials=False), activations(n, k, rng, specials=False)
    qa, qb = _mxfp8(a, device, layout), quantize_fp4(b.to(device), "mxfp4", layout=layout)
    cap = torch.cuda.get_device_capability() if harness_lane == "gpu" else None
    why = gemm_refusal("mxfp4", interpreter=runs_on_interpreter(_scaled_gemm_kernel), capability=cap,
                       a_format="e4m3")
    imitated = harness_arch.capability if harness_lane != "gpu" else None
    if why is None and imitated is not None and imitated < (8, 9):
        with pytest.raises(Exception, match=r"float8e4nv refused for sm\d+ .*e4nv needs sm89"):
            scaled_gemm(qa, qb, a_format="e4m3", layout=layout)
        return
    if why is not None:
        with pytest.raises(NotImplementedError, match=r"scaled_gemm\(mxfp4, a_format=e4m3\): "):
            scaled_gemm(qa, qb, a_format="e4m3", layout=layout)
        return
    c = scaled_gemm(qa, qb, a_format="e4m3", layout=layout).cpu()
    la = _mxfp8(a, "cpu")  # the same codes, linear scales
    lb = tuple(t.cpu() for t in quantize_fp4(b.to(device), "mxfp4"))
    assert torch.equal(lb[0], qb[0].cpu()) and torch.equal(la[0].view(torch.uint8), qa[0].cpu().view(torch.uint8))
    want = scaled_gemm_reference(la, lb, "mxfp4", "e4m3")
    scale = dequantize_mxfp8(*la).abs() @ dequantize_fp4(lb[0], lb[1], "mxfp4").abs().T
    assert want.abs().max() > 0
    assert_close_tol(c.double(), want, tolerance("mx.gemm", dtype="mxfp8e4m3"), scale=scale)


def test_e4m3_operands_are_checked_and_refused_below_sm89(device):
    from kernels.mx import gemm_refusal, quantize_fp4, scaled_gemm

    qa = _mxfp8(torch.ones(4, 64), device)
    qb = quantize_fp4(torch.ones(5, 64, device=device))
    for call, err, text in [
        (lambda: scaled_gemm(qa, qb, a_format="e5m2"), ValueError, r"a_format: expected 'e2m1' .* or 'e4m3'"),
        (lambda: scaled_gemm(qa, qb, "nvfp4", a_format="e4m3"), ValueError,
         r"a_format: 'e4m3' .* pairs with scheme 'mxfp4' only; got scheme 'nvfp4'"),
        (lambda: scaled_gemm(qb, qb, a_format="e4m3"), TypeError,
         r"a: its codes must be a torch.float8_e4m3fn tensor; got torch.uint8"),
        (lambda: scaled_gemm(qa, qb), TypeError, r"a: its codes must be a torch.uint8 tensor; got torch.float8_e4m3fn"),
        (lambda: scaled_gemm((qa[0][:, :32], qa[1][:, :1]), qb, a_format="e4m3"), ValueError,
         r"b: K = 64 but a has K = 32"),
        (lambda: scaled_gemm(qa[0], qb, a_format="e4m3"), TypeError, r"a: MXFP8 operands are \(codes, scales\)"),
    ]:
        with pytest.raises(err, match=text):
            call()
    assert "FP8, which Triton lowers from sm89 on" in gemm_refusal("mxfp4", interpreter=False, capability=(8, 6),
                                                                   a_format="e4m3")
    assert gemm_refusal("mxfp4", interpreter=False, capability=(8, 6)) is None
    assert gemm_refusal("mxfp4", interpreter=False, capability=(8, 9), a_format="e4m3") is None


@pytest.mark.arch("sm90", "interp")
def test_h100_golden_e4m3_x_e2m1(rng, device, golden, harness_lane):
    """The MXFP8 x MXFP4 product as an H100 computed it (Triton 3.6's emulation: e4m3 and e2m1 upcast to bf16,
    scaled, bf16 wgmma); the interpreter lane reproduces it bit for bit through harness.tensor_cores.dot_scaled.
    Block magnitudes 2^-30..2^30 reach e8m0 scales far from 127 on both sides."""
    from kernels.mx import quantize_fp4, scaled_gemm

    a = activations(130, 256, rng, specials=False)
    b = activations(67, 256, rng, specials=False)
    qa, qb = _mxfp8(a, device), quantize_fp4(b.to(device), "mxfp4")
    _skip_if_refused("mxfp4", "e4m3")
    product = scaled_gemm(qa, qb, a_format="e4m3").cpu()
    if harness_lane == "gpu":
        golden.check("a_codes", qa[0].cpu().view(torch.uint8))
        golden.check("b_codes", qb[0].cpu())
        golden.check("product", product)
        return
    for name, got in (("a_codes", qa[0].cpu().view(torch.uint8)), ("b_codes", qb[0].cpu())):
        want, _ = golden.load(name)
        assert torch.equal(got, want), f"{name}: the operands differ from the capture's: the inputs changed"
    want, meta = golden.load("product")
    differ = product.view(torch.int32) != want.view(torch.int32)
    assert not bool(differ.any()), (f"{int(differ.sum())} / {differ.numel()} product bits differ from the "
                                    f"{meta.get('arch')} golden (Triton {meta.get('triton_version')})")


@pytest.mark.arch("sm90", "interp")
@pytest.mark.mx_cases(rule=["floor", "rceil", "nvfp4"])
def test_h200_golden_quantize_and_gemm(mx_case, rng, device, golden, harness_lane):
    """Operands as the H200 quantized them (specials included in A) and the product of finite ones. On the
    interpreter lane (tl.dot_scaled through harness.tensor_cores.dot_scaled) the product must be the H200's bit for
    bit: the same inputs (the seed is the test's), the same golden files."""
    from kernels._interpreter import runs_on_interpreter
    from kernels.mx import gemm_refusal, quantize_fp4, scaled_gemm
    from kernels.mx.gemm import _scaled_gemm_kernel
    from kernels.mx.reference import nvfp4_global_scale

    # fp16 overflows past 2^16: the product's operands stay finite in every source dtype (the H200 run of
    # 2026-12-04 caught an all-NaN fp16 product from inf operands: the golden refused it)
    fits = 12 if mx_case.src == torch.float16 else 30
    a = activations(130, 256, rng).to(mx_case.src)
    b = activations(67, 256, rng, specials=False, max_exp=fits).to(mx_case.src)
    rule = None if mx_case.fmt == "nvfp4" else mx_case.scale_rule
    qs = []
    for name, t in (("a", a), ("b", b)):
        g = nvfp4_global_scale(t).to(device) if mx_case.fmt == "nvfp4" else None
        q = quantize_fp4(t.to(device), mx_case.fmt, scale_rule=rule, global_scale=g)
        golden.check(f"{name}_codes", q[0].cpu())
        golden.check(f"{name}_scales", q[1].cpu())
        qs.append(q)
    interp = runs_on_interpreter(_scaled_gemm_kernel)
    cap = None if interp else torch.cuda.get_device_capability()
    why = gemm_refusal(mx_case.fmt, interpreter=interp, capability=cap)
    if why is not None:
        if interp and mx_case.fmt != "nvfp4":  # the H200 computed a product golden this lane cannot reach
            pytest.skip(f"operands checked against the H200; the product is not: {why}")
        return
    if interp:  # compared only where the H200 computed a product: what its Triton refused has no golden
        captured = golden.load("a_codes")[1].get("triton_version", "")
        version = tuple(int(x) for x in captured.split(".")[:2])
        if gemm_refusal(mx_case.fmt, interpreter=False, capability=(9, 0), version=version) is not None:
            return
    a_fin = activations(130, 256, rng, specials=False, max_exp=fits).to(mx_case.src).to(device)
    g = nvfp4_global_scale(a_fin) if mx_case.fmt == "nvfp4" else None
    qa = quantize_fp4(a_fin, mx_case.fmt, scale_rule=rule, global_scale=g)
    product = scaled_gemm(qa, qs[1], mx_case.fmt).cpu()
    if harness_lane == "gpu":
        golden.check("product", product)
        return
    want, meta = golden.load("product")  # bits, not a tolerance: the shim must be the H200 (Triton 3.6) exactly
    differ = product.view(torch.int32) != want.view(torch.int32)
    assert not bool(differ.any()), (f"{int(differ.sum())} / {differ.numel()} product bits differ from the H200 "
                                    f"golden ({meta.get('arch')}, Triton {meta.get('triton_version')})")


@pytest.mark.arch("sm90", "interp")
@pytest.mark.parametrize("shape", nvfp4_sm90.CHECK_SHAPES, ids=lambda s: nvfp4_sm90.case_name(*s))
def test_h100_golden_nvfp4_as_triton_39_builds_it(shape, device, golden):
    """NVFP4 products as Triton 3.9's sm90 build computes them on an H100 (its cubins loaded there by
    benchmarks/nvfp4_ptx.py, the image's Triton 3.6 refusing NVFP4): one tile, four 64-row tiles by four, and a K
    split in 4 ranges. A lane whose Triton compiles NVFP4 for sm90 (or interprets it) must give those bits."""
    import json

    import numpy as np

    from kernels._versions import triton_version
    from kernels.mx import scaled_gemm

    z = np.load(golden.external(nvfp4_sm90.GOLDEN), allow_pickle=False)
    meta = json.loads(str(z["meta"]))
    pinned = tuple(int(x) for x in meta["triton"].split(".")[:2])
    if triton_version()[:2] != pinned:
        pytest.skip(f"the golden pins Triton {meta['triton']}'s NVFP4 emulation on sm90; this is Triton "
                    f"{'.'.join(map(str, triton_version()))}")
    _skip_if_refused("nvfp4")
    case = nvfp4_sm90.case_name(*shape)
    assert nvfp4_sm90.operand_digest(*shape) == str(z[f"{case}__inputs"]), (
        f"{case}: the seeded operands differ from those the {meta['gpu']} multiplied (torch draws other bytes)")
    qa, qb = (tuple(t.to(device) for t in q) for q in nvfp4_sm90.operands(*shape))
    bits = scaled_gemm(qa, qb, "nvfp4").cpu().contiguous().view(torch.int32).numpy().view(np.uint32)
    if nvfp4_sm90.digest(bits) == str(z[f"{case}__sha256"]):
        return
    want = z[f"{case}__kept"]
    head = int(np.count_nonzero(bits.reshape(-1)[: want.size] != want))
    pytest.fail(f"{case}: the product differs from the {meta['gpu']}'s (Triton {meta['triton']} PTX): {head} of the "
                f"first {want.size} products differ, the rest by digest", pytrace=False)


#: skinny products that scaled_gemm splits along K (kernels.mx.gemm.k_splits): M = 16 rows, K = 4096 in 4 ranges
SPLIT_SHAPE = (16, 80, 4096)


def _split_operands(rng, device, a_format, scheme="mxfp4"):
    from kernels.mx import quantize_fp4
    from kernels.mx.reference import nvfp4_global_scale

    m, n, k = SPLIT_SHAPE
    # block magnitudes 2^-8..2^8: many blocks reach the sum, so the order of the splits' adds shows in the bits
    a, b = activations(m, k, rng, specials=False, max_exp=8), activations(n, k, rng, specials=False, max_exp=8)
    if a_format == "e4m3":
        return _mxfp8(a, device), quantize_fp4(b.to(device), "mxfp4")
    return tuple(quantize_fp4(t.to(device), scheme, global_scale=nvfp4_global_scale(t).to(device)
                              if scheme == "nvfp4" else None) for t in (a, b))


def _skip_if_refused(scheme: str = "mxfp4", a_format: str = "e2m1") -> None:
    """Skip where scaled_gemm refuses ``scheme`` here (kernels.mx.gemm_refusal for this lane's interpreter or GPU),
    with its reason."""
    from kernels._interpreter import runs_on_interpreter
    from kernels.mx import gemm_refusal
    from kernels.mx.gemm import _scaled_gemm_kernel

    interp = runs_on_interpreter(_scaled_gemm_kernel)
    why = gemm_refusal(scheme, interpreter=interp, capability=None if interp else torch.cuda.get_device_capability(),
                       a_format=a_format)
    if why is not None:
        pytest.skip(why)


def _gemm_or_skip(qa, qb, a_format, scheme="mxfp4"):
    from kernels.mx import scaled_gemm

    _skip_if_refused(scheme, a_format)
    return lambda x, y: scaled_gemm(x, y, scheme, a_format=a_format).cpu()


@pytest.mark.parametrize(("scheme", "a_format"), [("mxfp4", "e2m1"), ("mxfp4", "e4m3"), ("nvfp4", "e2m1")],
                         ids=["mxfp4", "e4m3-x-mxfp4", "nvfp4"])
def test_split_k_is_the_in_order_fp32_sum_of_its_splits(scheme, a_format, rng, device, harness_arch, harness_lane):
    """A split product is ((C₀ + C₁) + C₂) + C₃ of scaled_gemm over each K range alone, bit for bit, on every lane
    (NVFP4: of the ranges' products with unit global scales, times the two global scales after the sum); the
    inputs are such that another order of the adds gives other bits."""
    from kernels.mx.gemm import SPLIT_ALIGN, k_splits

    imitated = harness_arch.capability if harness_lane != "gpu" else None
    if (a_format == "e4m3" or scheme == "nvfp4") and imitated is not None and imitated < (8, 9):
        pytest.skip("FP8 operands or scales need sm89 (the imitated arch refuses them)")
    m, n, k = SPLIT_SHAPE
    splits = k_splits(m, n, k)
    assert splits == 4 and k // splits % SPLIT_ALIGN == 0
    qa, qb = _split_operands(rng, device, a_format, scheme)
    gemm = _gemm_or_skip(qa, qb, a_format, scheme)
    group = 16 if scheme == "nvfp4" else 32
    unit = (torch.ones(1, device=device),) if scheme == "nvfp4" else ()
    per, pack_a = k // splits, 1 if a_format == "e4m3" else 2
    parts = []
    for s in range(splits):
        ca, cb = slice(s * per // pack_a, (s + 1) * per // pack_a), slice(s * per // 2, (s + 1) * per // 2)
        cs = slice(s * per // group, (s + 1) * per // group)
        assert k_splits(m, n, per) == 1
        parts.append(gemm((qa[0][:, ca].contiguous(), qa[1][:, cs].contiguous(), *unit),
                          (qb[0][:, cb].contiguous(), qb[1][:, cs].contiguous(), *unit)))
    in_order = ((parts[0] + parts[1]) + parts[2]) + parts[3]
    want = in_order * (qa[2].cpu().reshape(1) * qb[2].cpu().reshape(1)) if scheme == "nvfp4" else in_order
    got = gemm(qa, qb)
    assert torch.equal(got.view(torch.int32), want.view(torch.int32)), (
        f"{int((got.view(torch.int32) != want.view(torch.int32)).sum())} / {got.numel()} outputs differ from the "
        f"in-order sum of the splits")
    # the second pass writes out's rows at out's own stride, nothing past its columns
    from kernels.mx import scaled_gemm

    wide = torch.full((m, n + 8), -1.0, device=device)
    scaled_gemm(qa, qb, scheme, a_format=a_format, out=wide[:, :n])
    assert torch.equal(wide[:, :n].cpu().view(torch.int32), want.view(torch.int32))
    assert bool((wide[:, n:] == -1.0).all()), "the split sum wrote past out's columns"
    other = ((parts[3] + parts[2]) + parts[1]) + parts[0]
    assert not torch.equal(other.view(torch.int32), in_order.view(torch.int32)), "the inputs cannot tell orders apart"


@pytest.mark.interp_only
@pytest.mark.parametrize("a_format", ["e2m1", "e4m3"])
def test_the_interpreter_takes_sm90s_tiles_whose_height_decides_the_bits(a_format, rng, device):
    """On sm90 a 16-row tile (mma.sync) and a 128-row one (wgmma) give other bits; the H100 launches a skinny
    product with 16 rows, and the interpreter, imitating sm90, must too: with the 128-row tile it differed from the
    H100 at 1,037 of 1,280 outputs of a 16 x 80 x 1024 MXFP4 product, with sm90's at none, split or not
    (``scripts/check_split_k.py --compare`` against that card's capture, 2026-12-06)."""
    from kernels.mx import quantize_fp4
    from kernels.mx.gemm import _launch, k_splits, launch_config, scaled_gemm

    m, n, k = 16, 80, 1024  # unsplit: the tile alone (test_split_k_* covers the split)
    a, b = activations(m, k, rng, specials=False, max_exp=8), activations(n, k, rng, specials=False, max_exp=8)
    qa = _mxfp8(a, device) if a_format == "e4m3" else quantize_fp4(a.to(device), "mxfp4")
    qb = quantize_fp4(b.to(device), "mxfp4")
    got = scaled_gemm(qa, qb, "mxfp4", a_format=a_format)
    tiles = {}
    for cap in ((9, 0), None):
        out = torch.empty(m, n)
        _launch(qa, qb, out, "mxfp4", "linear", a_format, launch_config(m, n, k, cap), k_splits(m, n, k))
        tiles[cap] = out
    assert launch_config(m, n, k, (9, 0))[0] == 16 and launch_config(m, n, k, None)[0] == 128
    assert torch.equal(got.view(torch.int32), tiles[(9, 0)].view(torch.int32))
    assert not torch.equal(tiles[(9, 0)].view(torch.int32), tiles[None].view(torch.int32))  # the height shows


@pytest.mark.parametrize("a_format", ["e2m1", "e4m3"])
def test_a_tiles_k_step_leaves_the_bits(a_format, rng, device):
    """launch_config picks each tile for speed alone within a height: the emulation adds its MMAs' K blocks into
    the accumulator in order, so the 64-row tile's K step of 128 (shipped for 64 < M <= 256) and of 256 (shipped
    before) give one product, bit for bit, on the GPU as on the interpreter; a 16-row tile does not."""
    from kernels.mx import quantize_fp4
    from kernels.mx.gemm import _launch

    _skip_if_refused("mxfp4", a_format)
    m, n, k = 130, 67, 1024
    a, b = activations(m, k, rng, specials=False, max_exp=8), activations(n, k, rng, specials=False, max_exp=8)
    qa = _mxfp8(a, device) if a_format == "e4m3" else quantize_fp4(a.to(device), "mxfp4")
    qb = quantize_fp4(b.to(device), "mxfp4")
    outs = {}
    for config in ((64, 128, 128, 1, 4, 4), (64, 128, 256, 1, 4, 4), (16, 64, 256, 1, 4, 4)):
        out = torch.empty(m, n, device=device)
        _launch(qa, qb, out, "mxfp4", "linear", a_format, config, 1)
        outs[config[:3]] = out.cpu().view(torch.int32)
    assert torch.equal(outs[(64, 128, 128)], outs[(64, 128, 256)]), (
        f"{int((outs[(64, 128, 128)] != outs[(64, 128, 256)]).sum())} / {m * n} products differ between K steps")
    assert not torch.equal(outs[(64, 128, 128)], outs[(16, 64, 256)])  # the height shows in these inputs
