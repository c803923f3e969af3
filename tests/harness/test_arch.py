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


# --- bad inputs get clear errors, valid ones are never refused ------------------------------------------------


@pytest.mark.parametrize("alias, name", [("e4m3fn", "e4nv"), ("float8_e4m3fn", "e4nv"), ("E4M3", "e4nv"),
                                         ("fp8e5", "e5m2"), ("float8e4b8", "e4m3fnuz"), ("float8e4b15", "e4b15")])
def test_supports_format_resolves_aliases(alias, name):
    """encode(x, 'e4m3fn', arch='sm90') works, so the arch model must judge an alias as the format it names."""
    for target in ("sm80", "sm90", "gfx942", "gfx950", "interp"):
        assert supports_format(target, alias) == supports_format(target, name), (target, alias)
    assert supports_format("sm90", "e4m3fn") == (True, "")


def test_supports_format_takes_format_objects_and_dtypes():
    import torch

    from harness.fp8 import FORMATS

    assert supports_format("sm90", FORMATS["e4nv"]) == (True, "")
    assert supports_format("sm90", tl.float8e4nv) == (True, "")
    assert supports_format("sm90", torch.float8_e5m2) == (True, "")
    assert supports_format("sm80", torch.float8_e4m3fn) == (False, "e4nv needs sm89+ (running on sm80)")


def test_the_arch_model_judges_every_fp8_format_of_harness_fp8():
    from harness import arch
    from harness.fp8 import FORMATS

    assert set(arch._FP8_FORMATS) == set(FORMATS)


@pytest.mark.parametrize("bad", ["bogus", "fp16", "e2m1", "e8m0", ""])
def test_supports_format_refuses_what_is_not_an_fp8_format(bad):
    """An unknown format used to get the reason 'is a ROCm format' on CUDA, a skip instead of an error."""
    with pytest.raises(ValueError, match=rf"^fmt {bad!r} is not an FP8 format; expected one of e4nv, e5m2, e4b15, "):
        supports_format("sm90", bad)


@pytest.mark.parametrize("bad", [3, None, 1.5])
def test_supports_format_type_error_names_fmt(bad):
    with pytest.raises(TypeError, match=r"^fmt must be an FP8 format name, FP8Format or float8 dtype, got "):
        supports_format("sm90", bad)


@pytest.mark.parametrize("name, kind, cap", [
    ("interp", "interp", None), ("cpu", "cpu", None), ("gfx942", "rocm", None), ("gfx90a", "rocm", None),
    ("sm90", "cuda", (9, 0)), ("sm30", "cuda", (3, 0)), ("sm121", "cuda", (12, 1)), ("sm130", "cuda", (13, 0)),
])
def test_every_arch_the_module_builds_constructs(name, kind, cap):
    """parse_arch's and detect_arch's values (a detected GPU newer than the table included) stay valid."""
    a = Arch(name, kind, cap)
    assert (a.name, a.kind, a.capability) == (name, kind, cap)


def test_a_cuda_arch_derives_its_capability_from_its_name():
    """Left out, the capability used to stay None: family kept the name and at_least compared names only."""
    a = Arch("sm90", "cuda")
    assert a == parse_arch("sm90") and a.capability == (9, 0)
    assert a.at_least("sm80") and Arch("sm86", "cuda").family == "sm80"
    assert Arch("sm90", "cuda", [9, 0]).capability == (9, 0)


@pytest.mark.parametrize("name, kind, cap, match", [
    ("sm90", "cuda", (8, 0), r"Arch.capability \(8, 0\) disagrees with Arch.name 'sm90'; expected \(9, 0\)"),
    ("sm90a", "cuda", (9, 0), r"Arch.name 'sm90a' is not a CUDA arch name; expected 'smXY'"),
    ("SM90", "cuda", None, r"Arch.name 'SM90' is not a CUDA arch name"),
    ("sm20", "cuda", (2, 0), r"Arch.name 'sm20' is not a CUDA arch name; expected 'smXY' with capability 3.0"),
    ("gfx942", "cuda", None, r"Arch.name 'gfx942' is not a CUDA arch name"),
    ("sm90", "rocm", None, r"Arch.name 'sm90' is not a ROCm processor name"),
    ("gfx942", "rocm", (9, 4), r"Arch.capability is a CUDA compute capability; a rocm arch has none"),
    ("interp", "interp", (9, 0), r"a interp arch has none"),
    ("cpu", "interp", None, r"Arch.name must be 'interp' for kind 'interp', got 'cpu'"),
])
def test_arch_name_kind_and_capability_must_agree(name, kind, cap, match):
    with pytest.raises(ValueError, match=match):
        Arch(name, kind, cap)


@pytest.mark.parametrize("name, cap, match", [
    (90, None, r"^Arch.name must be a str such as 'sm90'"),
    ("sm90", "x", r"^Arch.capability must be None or a \(major, minor\) tuple of ints such as \(9, 0\), got 'x'"),
    ("sm90", (9,), r"^Arch.capability must be None or a \(major, minor\) tuple"),
    ("sm90", (9.0, 0), r"^Arch.capability must be None or a \(major, minor\) tuple"),
])
def test_arch_type_errors(name, cap, match):
    with pytest.raises(TypeError, match=match):
        Arch(name, "cuda", cap)


@pytest.mark.parametrize("spec, name", [("sm90a", "sm90"), ("sm_90a", "sm90"), ("compute_90a", "sm90"),
                                        ("sm100a", "sm100"), ("sm100f", "sm100"), ("sm_103f", "sm103"),
                                        ("sm120f", "sm120"), ("sm121a", "sm121"), ("compute_120f", "sm120")])
def test_nvidia_target_suffixes_parse_to_the_plain_arch(spec, name):
    assert parse_arch(spec).name == name


@pytest.mark.parametrize("bad, why", [("sm90z", "NVIDIA defines no 'z' target suffix"),
                                      ("compute_89q", "NVIDIA defines no 'q' target suffix"),
                                      ("sm80a", "'a' targets begin at sm90a"), ("sm90f", "'f' targets begin at sm100f"),
                                      ("sm89a", "'a' targets begin at sm90a")])
def test_other_suffixes_are_refused(bad, why):
    """Any one letter used to be dropped: sm90z was judged as sm90."""
    with pytest.raises(ValueError, match=rf"^arch {bad!r} is not understood: .*{why}"):
        parse_arch(bad)
    with pytest.raises(ValueError, match=why):
        parse_arch(bad, known=False)


@pytest.mark.parametrize("call, arg", [
    pytest.param(lambda: parse_arch("sm90").at_least(90), "other", id="at_least-int"),
    pytest.param(lambda: parse_arch("sm90").at_least(None), "other", id="at_least-None"),
    pytest.param(lambda: parse_arch("sm90").same_family(90), "other", id="same_family-int"),
    pytest.param(lambda: supports_format(90, "e4nv"), "arch", id="supports_format-int"),
    pytest.param(lambda: supports_format(None, "e4nv"), "arch", id="supports_format-None"),
])
def test_arch_arguments_of_the_wrong_type_name_the_argument(call, arg):
    """These used to raise AttributeError: 'int' object has no attribute 'kind'."""
    with pytest.raises(TypeError, match=rf"^{arg} must be an Arch or an arch name such as 'sm90', got "):
        call()


@pytest.mark.parametrize("fn", ["supports_bf16_arithmetic", "supports_int8_dot", "supports_scaled_dot_emulation"])
def test_supports_functions_type_check_arch(fn):
    from harness import arch

    with pytest.raises(TypeError, match=r"^arch must be an Arch or an arch name such as 'sm90', got int"):
        getattr(arch, fn)(90)
    with pytest.raises(TypeError, match=r"^arch must be an Arch or an arch name such as 'sm90', got int"):
        arch.supports_scaled_dot(90, "e8m0")
