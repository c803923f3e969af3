"""The architecture model: parsing, families, fallback chains, FP8 support."""

import pytest

from harness.arch import Arch, parse_arch, supports_format


@pytest.mark.parametrize(
    "spec, name, cap",
    [("sm90", "sm90", (9, 0)), ("sm_89", "sm89", (8, 9)), ("120", "sm120", (12, 0)), ("sm90a", "sm90", (9, 0)),
     ("SM100", "sm100", (10, 0))],
)
def test_parse_cuda(spec, name, cap):
    a = parse_arch(spec)
    assert (a.name, a.kind, a.capability) == (name, "cuda", cap)


@pytest.mark.parametrize("spec, kind", [("interp", "interp"), ("cpu", "cpu"), ("gfx942", "rocm")])
def test_parse_other(spec, kind):
    assert parse_arch(spec).kind == kind


@pytest.mark.parametrize("bad", ["", "sm", "ampere", "sm_2", "gfx"])
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
