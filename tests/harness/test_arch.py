"""The architecture model: parsing, families, fallback chains, FP8 support."""

import pytest
import triton
import triton.language as tl

from harness.arch import Arch, parse_arch, supports_format


@pytest.mark.parametrize(
    "spec, name, cap",
    [("sm90", "sm90", (9, 0)), ("sm_89", "sm89", (8, 9)), ("120", "sm120", (12, 0)), ("sm90a", "sm90", (9, 0)),
     ("SM100", "sm100", (10, 0)), ("sm30", "sm30", (3, 0)), ("sm_35", "sm35", (3, 5))],
)
def test_parse_cuda(spec, name, cap):
    a = parse_arch(spec)
    assert (a.name, a.kind, a.capability) == (name, "cuda", cap)


@pytest.mark.parametrize("spec, kind", [("interp", "interp"), ("cpu", "cpu"), ("gfx942", "rocm")])
def test_parse_other(spec, kind):
    assert parse_arch(spec).kind == kind
    assert parse_arch(spec).is_gpu is (kind == "rocm")
    assert parse_arch("sm75").is_gpu


@pytest.mark.parametrize("bad", ["", "sm", "ampere", "sm_2", "gfx", "sm20", "sm_29"])
def test_parse_rejects(bad):
    with pytest.raises(ValueError, match="arch .* is not understood|not a CUDA architecture"):
        parse_arch(bad)


def test_parse_type_error():
    with pytest.raises(TypeError, match="arch must be a str or Arch"):
        parse_arch(90)


@pytest.mark.parametrize(
    "spec, family", [("sm86", "sm80"), ("sm87", "sm80"), ("sm89", "sm89"), ("sm103", "sm100"),
                     ("sm121", "sm120"), ("sm90", "sm90"), ("gfx942", "gfx942"), ("gfx941", "gfx942"),
                     ("gfx950", "gfx950"), ("gfx1201", "gfx1200"), ("interp", "interp")]
)
def test_family(spec, family):
    assert parse_arch(spec).family == family


def test_chain_order_and_no_duplicates():
    assert parse_arch("sm86").chain() == ("sm86", "sm80", "cuda", "*")
    assert parse_arch("sm90").chain() == ("sm90", "cuda", "*")
    assert parse_arch("interp").chain() == ("interp", "*")


def test_exact_family_vs_at_least():
    sm90, sm100, sm86 = parse_arch("sm90"), parse_arch("sm100"), parse_arch("sm86")
    assert sm86.same_family("sm80") and not sm90.same_family("sm80")
    assert sm100.at_least("sm90") and not sm86.at_least("sm89")
    assert not parse_arch("interp").at_least("sm75")


def test_arch_kind_validated():
    with pytest.raises(ValueError, match="Arch.kind must be one of"):
        Arch("x", "tpu")


@pytest.mark.parametrize(
    "arch, fmt, ok, reason",
    [("sm80", "e4nv", False, "e4nv needs sm89+ (running on sm80)"), ("sm89", "e4nv", True, ""),
     ("sm75", "e4b15", True, ""), ("interp", "e4b15", True, ""), ("sm90", "e4m3fnuz", False, "ROCm format"),
     ("gfx942", "e4m3fnuz", True, ""), ("gfx942", "e4b15", False, "not supported by Triton on ROCm"),
     ("gfx942", "e4nv", False, "needs gfx950 or gfx12xx"), ("gfx950", "e4nv", True, ""),
     ("gfx1201", "e5m2", True, ""), ("gfx1201", "e4m3fnuz", False, "needs gfx94x"),
     ("gfx1100", "e4nv", False, "needs gfx950 or gfx12xx"),
     ("cpu", "e4nv", False, "no GPU and not interpreting")],
)
def test_supports_format(arch, fmt, ok, reason):
    got_ok, got_reason = supports_format(arch, fmt)
    assert got_ok is ok
    assert reason in got_reason


@pytest.mark.parametrize(
    "spec, chain",
    [("sm87", ("sm87", "sm80", "cuda", "*")), ("sm110", ("sm110", "sm100", "cuda", "*")),
     ("sm121", ("sm121", "sm120", "cuda", "*")), ("sm89", ("sm89", "cuda", "*")),
     ("gfx941", ("gfx941", "gfx942", "rocm", "*")), ("gfx942", ("gfx942", "rocm", "*")),
     ("gfx1201", ("gfx1201", "gfx1200", "rocm", "*")), ("cpu", ("cpu", "*"))],
)
def test_chain_walks_name_family_kind_wildcard(spec, chain):
    assert parse_arch(spec).chain() == chain


@pytest.mark.parametrize(
    "a, b, expected",
    [("sm90", "sm90", True), ("sm89", "sm90", False), ("sm120", "sm100", True), ("sm90", "gfx942", False),
     ("gfx942", "sm75", False), ("gfx950", "gfx942", False), ("gfx942", "gfx942", True),
     ("interp", "interp", True), ("cpu", "interp", False), ("interp", "cpu", False), ("sm75", "interp", False)],
)
def test_at_least_never_crosses_kinds(a, b, expected):
    assert parse_arch(a).at_least(b) is expected
    assert parse_arch(a).at_least(parse_arch(b)) is expected


@pytest.mark.parametrize(
    "a, b, expected",
    [("sm86", "sm80", True), ("sm80", "sm86", True), ("sm89", "sm80", False), ("sm110", "sm100", True),
     ("sm103", "sm100", True), ("sm120", "sm100", False), ("sm121", "sm120", True), ("gfx941", "gfx942", True),
     ("gfx950", "gfx942", False), ("gfx1201", "gfx1200", True), ("gfx942", "sm90", False),
     ("interp", "interp", True), ("interp", "cpu", False)],
)
def test_same_family_is_exact(a, b, expected):
    assert parse_arch(a).same_family(b) is expected


@pytest.mark.parametrize("version, refused", [("3.6.0", True), ("3.8.0", True), ("3.9.0", False)])
def test_nvfp4_scaled_dots_follow_the_triton_version(monkeypatch, version, refused):
    """Triton 3.6 (and, assumed, 3.7/3.8) refuses e4m3 scales where it emulates dot_scaled: sm89 and sm90 only."""
    from harness import arch, versions

    monkeypatch.setattr(versions, "triton_version", lambda: version)
    monkeypatch.setattr(arch, "triton_version", lambda: version)
    monkeypatch.setattr(arch, "triton_at_least", versions.triton_at_least)
    for target in ("sm89", "sm90"):
        ok, why = arch.supports_scaled_dot(target, "e4m3")
        assert ok is not refused
        assert why == ("" if ok else f"NVFP4 tl.dot_scaled (e4m3 scales) does not compile for {target} with triton "
                       f"{version} (Triton 3.6 refuses it where it emulates dot_scaled: sm89 and sm90)")
    for target, scale in (("sm90", "e8m0"), ("sm100", "e4m3"), ("sm120", "e4m3"), ("gfx950", "e4m3")):
        assert arch.supports_scaled_dot(target, scale) == (True, ""), (target, scale)


def test_e5m2_below_sm80_follows_the_installed_triton():
    from harness.versions import triton_at_least

    ok, reason = supports_format("sm75", "e5m2")
    assert ok is (not triton_at_least(3, 7))
    assert ok or reason.startswith("e5m2 needs sm80+ with triton ")
    assert supports_format("sm80", "e5m2") == (True, "")


# --- the model agrees with the compiler ---------------------------------------------------------------------

_FMTS = {"e4nv": "float8e4nv", "e5m2": "float8e5", "e4b15": "float8e4b15"}


@triton.jit
def fmt_roundtrip(a_ptr, b_ptr, c_ptr, codes_ptr, da_ptr, db_ptr, dc_ptr, FMT: tl.constexpr, BLOCK: tl.constexpr):
    """Encode three sources to FMT, decode to three destinations: what 'supports the format' means."""
    o = tl.arange(0, BLOCK)
    tl.store(codes_ptr + o, tl.load(a_ptr + o).to(FMT).to(tl.uint8, bitcast=True))
    tl.store(codes_ptr + BLOCK + o, tl.load(b_ptr + o).to(FMT).to(tl.uint8, bitcast=True))
    tl.store(codes_ptr + 2 * BLOCK + o, tl.load(c_ptr + o).to(FMT).to(tl.uint8, bitcast=True))
    q = tl.load(codes_ptr + o).to(FMT, bitcast=True)
    tl.store(da_ptr + o, q.to(da_ptr.dtype.element_ty))
    tl.store(db_ptr + o, q.to(db_ptr.dtype.element_ty))
    tl.store(dc_ptr + o, q.to(dc_ptr.dtype.element_ty))


@pytest.mark.lane_independent
@pytest.mark.parametrize("fmt", sorted(_FMTS))
def test_supports_format_agrees_with_the_compiler(fmt):
    """Every (format, default target) the model supports compiles encode and decode with fp16, fp32 and bf16
    (fp16 twice for e4b15: Triton's e4b15 conversion takes fp16/fp32 only, the seed bug's lesson); every one it
    refuses does not compile. Runs on whichever Triton is installed (CI: 3.9 and 3.6). Lane-independent, and
    kept off the GPU lane on purpose: in a process that runs GPU kernels, Triton 3.6 keeps the e5m2 lowering
    of the GPU's own target (harness.compile.cache), so pre-sm89 e5m2 compiles there fail in ptxas falsely."""
    from harness.compile.matrix import DEFAULT_TARGETS, compile_matrix, error_line

    third = "fp16" if fmt == "e4b15" else "bf16"
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp32", "c_ptr": f"*{third}", "codes_ptr": "*u8", "da_ptr": "*fp16",
           "db_ptr": "*fp32", "dc_ptr": f"*{third}"}
    res = compile_matrix(fmt_roundtrip, signature=sig, constexprs={"FMT": getattr(tl, _FMTS[fmt]), "BLOCK": 64},
                         targets=DEFAULT_TARGETS)
    wrong = []
    for target, r in res.items():
        ok, reason = supports_format(target, fmt)
        compiled = not isinstance(r, BaseException)
        if ok != compiled:
            said = "supported" if ok else f"refused ({reason})"
            got = "compiles" if compiled else error_line(r)
            wrong.append(f"{target}: model says {said}, compiler: {got}")
    assert not wrong, f"triton {triton.__version__}, {fmt}:\n" + "\n".join(wrong)


@pytest.mark.parametrize("bad, near", [("sm900", "sm90"), ("sm91", "sm90"), ("sm95", "sm90"), ("gfx9999", "gfx909"),
                                       ("sm10", None), ("bogus", None), ("gfx943", "gfx942")])
def test_unknown_archs_are_refused_with_the_nearest_known_name(bad, near):
    """A well-formed name no GPU has (sm91, gfx9999) used to be accepted and judged as that arch."""
    with pytest.raises(ValueError) as e:
        parse_arch(bad)
    text = str(e.value)
    assert text.startswith(f"arch {bad!r} ") and "known archs: interp, cpu, sm30," in text
    if near is not None:
        assert f"(did you mean {near!r}?)" in text


def test_compile_targets_keep_their_own_check_and_detection_never_refuses(monkeypatch):
    """known=False (compile targets, checked against the installed Triton) accepts a well-formed name; a GPU newer
    than the table is what runs, so detecting it never raises."""
    import torch

    from harness import arch

    assert parse_arch("sm91", known=False).cc == 91
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: (13, 0))
    monkeypatch.setattr(torch.version, "hip", None)
    assert arch.detect_arch() == Arch("sm130", "cuda", (13, 0))


def test_outside_pytest_a_bad_harness_arch_names_the_variable(monkeypatch):
    from harness import session

    monkeypatch.setattr(session, "_stack", [])
    monkeypatch.setenv("HARNESS_ARCH", "sm91")
    with pytest.raises(ValueError, match=r"^HARNESS_ARCH=sm91: arch 'sm91' .*did you mean 'sm90'"):
        session.current_arch()
