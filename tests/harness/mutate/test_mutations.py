"""Mutant generation, one kind at a time, on small kernels: each expected edit is written from the kind's rule."""

from __future__ import annotations

import textwrap

import pytest

from harness.mutate.mutations import KINDS, MutateError, mutants

HEAD = "import triton\nimport triton.language as tl\nfrom triton.language.extra import libdevice\n\n\n"


def kernel(body: str, name: str = "k", args: str = "x_ptr, y_ptr, n, BLOCK: tl.constexpr") -> str:
    code = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
    return HEAD + f"@triton.jit\ndef {name}({args}):\n{code}\n"


def edits(src: str, kind: str, name: str = "k") -> list[tuple[int, str, str]]:
    """(line, old line, new line) of each mutant of ``kind`` (every rule edits within one line here)."""
    out = []
    old = src.splitlines()
    for m in mutants(src, "pkg/k.py", name):
        if m.kind != kind:
            continue
        new = m.source.splitlines()
        assert len(new) == len(old)
        (i,) = [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
        assert m.line == i + 1
        out.append((m.line, old[i].strip(), new[i].strip()))
    return out


def test_drop_f32_before_a_low_precision_cast_with_its_diff():
    src = kernel("""
        x = tl.load(x_ptr + tl.arange(0, BLOCK)).to(tl.float32)
        b = x.to(tl.int32, bitcast=True).to(tl.float32, bitcast=True)
        tl.store(y_ptr + tl.arange(0, BLOCK), x.to(tl.float8e4nv))
    """)
    (m,) = [m for m in mutants(src, "pkg/k.py", "k") if m.kind == "drop-f32"]
    assert (m.file, m.kernel, m.line, m.col) == ("pkg/k.py", "k", 8, 8)
    assert m.diff == ("--- a/pkg/k.py\n+++ b/pkg/k.py\n@@ -8 +8 @@\n"
                      "-    x = tl.load(x_ptr + tl.arange(0, BLOCK)).to(tl.float32)\n"
                      "+    x = tl.load(x_ptr + tl.arange(0, BLOCK))\n")


def test_drop_f32_needs_a_low_precision_cast_in_the_function():
    src = kernel("""
        x = tl.load(x_ptr).to(tl.float32)
        tl.store(y_ptr, x * 2)
    """)
    assert edits(src, "drop-f32") == []


def test_fp8_formats_swapped():
    src = kernel("""
        x = tl.load(x_ptr)
        tl.store(y_ptr, x.to(tl.float8e4nv))
        tl.store(y_ptr + 1, x.to(tl.float8e5))
    """)
    assert edits(src, "fp8-format") == [
        (9, "tl.store(y_ptr, x.to(tl.float8e4nv))", "tl.store(y_ptr, x.to(tl.float8e5))"),
        (9, "tl.store(y_ptr, x.to(tl.float8e4nv))", "tl.store(y_ptr, x.to(tl.float8e4b15))"),
        (10, "tl.store(y_ptr + 1, x.to(tl.float8e5))", "tl.store(y_ptr + 1, x.to(tl.float8e4nv))"),
    ]


def test_rint_becomes_floor_half_up_in_the_modules_own_alias():
    src = kernel("""
        x = tl.load(x_ptr)
        tl.store(y_ptr, libdevice.rint(x * 2.0))
    """).replace("import triton.language as tl", "import triton.language as lang")
    assert edits(src, "rint") == [(9, "tl.store(y_ptr, libdevice.rint(x * 2.0))",
                                   "tl.store(y_ptr, lang.floor(x * 2.0 + 0.5))")]


def test_mask_compares_only_where_they_reach_a_mask():
    src = kernel("""
        offs = tl.arange(0, BLOCK)
        m = offs < n
        big = offs >= 4
        x = tl.load(x_ptr + offs, mask=m, other=0.0)
        tl.store(y_ptr + offs, tl.where(big, x, 0.0), mask=(offs > 1) & (offs <= n))
    """)
    assert edits(src, "mask-compare") == [
        (9, "m = offs < n", "m = offs <= n"),
        (12, "tl.store(y_ptr + offs, tl.where(big, x, 0.0), mask=(offs > 1) & (offs <= n))",
         "tl.store(y_ptr + offs, tl.where(big, x, 0.0), mask=(offs >= 1) & (offs <= n))"),
        (12, "tl.store(y_ptr + offs, tl.where(big, x, 0.0), mask=(offs > 1) & (offs <= n))",
         "tl.store(y_ptr + offs, tl.where(big, x, 0.0), mask=(offs > 1) & (offs < n))"),
    ]


def test_other_values_changed():
    src = kernel("""
        a = tl.load(x_ptr, mask=n > 0, other=0.0)
        b = tl.load(x_ptr, mask=n > 0, other=-1)
        c = tl.load(x_ptr, mask=n > 0, other=float("-inf"))
    """)
    assert [(ln, new) for ln, _, new in edits(src, "other")] == [
        (8, "a = tl.load(x_ptr, mask=n > 0, other=1.0)"),
        (9, "b = tl.load(x_ptr, mask=n > 0, other=0)"),
        (10, "c = tl.load(x_ptr, mask=n > 0, other=0)"),
    ]


def test_maximum_minimum_swapped_and_the_clamp_dropped():
    src = kernel("""
        x = tl.load(x_ptr)
        y = tl.minimum(tl.maximum(x, 0.0), 15.0)
        z = tl.clamp(x, -1.0, 1.0)
    """)
    assert [new for _, _, new in edits(src, "min-max")] == ["y = tl.maximum(tl.maximum(x, 0.0), 15.0)",
                                                            "y = tl.minimum(tl.minimum(x, 0.0), 15.0)"]
    assert [new for _, _, new in edits(src, "clamp")] == ["y = tl.maximum(x, 0.0)", "z = x"]


def test_a_replacement_keeps_its_operands_together():
    src = kernel("""
        x = tl.load(x_ptr)
        q = tl.clamp(x * s, -448.0, 448.0).to(tl.float8e4nv)
        h = 2 * (x + s).to(tl.float32).to(tl.float16)
        b = (x >> 4).to(tl.uint8)
        c = tl.clamp(x * s, -448.0, 448.0)
    """)
    # SGLang's quant (y * y_s_inv) came out as y * y_s_inv.to(...): the cast moved onto one operand
    assert [new for _, _, new in edits(src, "clamp")] == ["q = (x * s).to(tl.float8e4nv)", "c = x * s"]
    assert [new for _, _, new in edits(src, "drop-f32")] == ["h = 2 * (x + s).to(tl.float16)"]
    assert [new for _, _, new in edits(src, "nibble")] == ["b = (x & 0xF).to(tl.uint8)"]


def test_saturation_constants_replaced_by_another_formats():
    src = kernel("""
        x = tl.load(x_ptr)
        a = tl.clamp(x, -448.0, 448.0)
        b = tl.minimum(x, 57344)
        c = x * 3.0
    """)
    assert [new for _, _, new in edits(src, "saturation")] == [
        "a = tl.clamp(x, -240.0, 448.0)", "a = tl.clamp(x, -448.0, 240.0)", "b = tl.minimum(x, 448)"]


def test_off_by_one_on_arange_and_offsets():
    src = kernel("""
        offs = tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + n))
    """)
    assert [new for _, _, new in edits(src, "off-by-one")] == [
        "offs = (tl.arange(0, BLOCK) + 1)", "tl.store(y_ptr + (offs + 1), tl.load(x_ptr + n))"]


def test_reduction_axis_changed():
    src = kernel("""
        x = tl.load(x_ptr + tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :])
        s = tl.sum(x, axis=1)
        m = tl.max(x, 0)
        c = tl.cumsum(x, axis=0)
    """)
    assert [new for _, _, new in edits(src, "axis")] == [
        "s = tl.sum(x, axis=0)", "m = tl.max(x, 1)", "c = tl.cumsum(x, axis=1)"]


def test_an_inner_axis_that_reduces_the_same_axes_is_not_a_mutant():
    src = kernel("""
        x = tl.load(x_ptr + tl.arange(0, BLOCK)[:, None, None] + tl.arange(0, BLOCK)[None, :, None])
        s = tl.sum(tl.sum(x, axis=2), axis=1)
        m = tl.max(tl.max(x, axis=1), axis=0)
    """)
    # s: inner 2 -> 1 reduces {1, 2} again (skipped); outer 1 -> 0 reduces {0, 2}. m: inner 1 -> 0 then 0
    # reduces {0, 1} again (skipped); outer 0 -> 1 reduces {1, 2}
    assert [new for _, _, new in edits(src, "axis")] == ["s = tl.sum(tl.sum(x, axis=2), axis=0)",
                                                         "m = tl.max(tl.max(x, axis=1), axis=1)"]


def test_nibble_order_swapped():
    src = kernel("""
        b = tl.load(x_ptr)
        lo = b & 0xF
        hi = b >> 4
        w = lo | (hi << 4)
    """)
    assert [new for _, _, new in edits(src, "nibble")] == ["lo = b >> 4", "hi = b & 0xF", "w = (lo << 4) | hi"]


def test_ceil_and_floor_swapped():
    src = kernel("""
        x = tl.load(x_ptr)
        e = tl.ceil(tl.log2(x))
        f = tl.math.floor(x)
    """)
    assert [new for _, _, new in edits(src, "ceil-floor")] == ["e = tl.floor(tl.log2(x))", "f = tl.math.ceil(x)"]


def test_only_the_named_function_is_mutated():
    src = kernel("return tl.maximum(x_ptr, 0)", name="helper", args="x_ptr") + "\n\n" + kernel("""
        x = tl.load(x_ptr)
        tl.store(y_ptr, x)
    """)
    assert mutants(src, "pkg/k.py", "k") == []
    assert [m.line for m in mutants(src, "pkg/k.py", "helper")] == [8]


def test_equivalent_mutants_declared_in_place():
    src = kernel("""
        x = tl.load(x_ptr)
        y = tl.maximum(x, 0.0)  # harness: equivalent-mutant(min-max): x is never negative here
        z = tl.maximum(y, 1.0)
    """)
    got = [(m.line, m.declared) for m in mutants(src, "pkg/k.py", "k") if m.kind == "min-max"]
    assert got == [(9, "x is never negative here"), (10, None)]


def test_an_equivalent_mutant_declared_by_column():
    src = kernel("""
        x = tl.load(x_ptr)
        y = tl.minimum(tl.maximum(x, 0.0), 1.0)  # harness: equivalent-mutant(min-max@8): a reason
    """)
    got = [(m.line, m.col, m.declared) for m in mutants(src, "pkg/k.py", "k") if m.kind == "min-max"]
    assert got == [(9, 8, "a reason"), (9, 19, None)]


def test_an_equivalent_mutant_declared_on_the_comment_lines_above():
    src = kernel("""
        x = tl.load(x_ptr)
        # harness: equivalent-mutant(min-max): a reason
        # that goes on
        y = tl.maximum(x, 0.0)
        z = tl.maximum(y, 0.0)
    """)
    got = [(m.line, m.declared) for m in mutants(src, "pkg/k.py", "k") if m.kind == "min-max"]
    assert got == [(11, "a reason that goes on"), (12, None)]


@pytest.mark.parametrize(("marker", "message"), [
    ("# harness: equivalent-mutant(max-min): same", r"pkg/k\.py:8: .*expected kinds among .*got 'max-min'"),
    ("# harness: equivalent-mutant(min-max):", r"pkg/k\.py:8: equivalent-mutant\(min-max\) needs a reason"),
    ("# harness: equivalent-mutant(min-max@x): r", r"pkg/k\.py:8: .*\(each optionally @COLUMN\), got 'min-max@x'"),
])
def test_a_bad_declaration_names_its_line(marker, message):
    src = kernel(f"x = tl.maximum(tl.load(x_ptr), 0.0)  {marker}")
    with pytest.raises(MutateError, match=message):
        mutants(src, "pkg/k.py", "k")


def test_an_unknown_function_lists_the_files_kernels():
    with pytest.raises(MutateError, match=r"pkg/k\.py::nope: no @triton.jit function 'nope'.*: k\)"):
        mutants(kernel("pass"), "pkg/k.py", "nope")


def test_every_kind_has_a_rule_here():
    src = kernel("""
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
        y = tl.minimum(tl.maximum(libdevice.rint(x), -448.0), 448.0)
        w = (tl.sum(x.to(tl.int32), axis=0) >> 4) | (tl.ceil(y).to(tl.int32) << 4)
        tl.store(y_ptr + offs, w.to(tl.float8e4nv), mask=offs < n)
    """)
    assert {m.kind for m in mutants(src, "pkg/k.py", "k")} == set(KINDS)


def test_a_helpers_tests_are_those_that_launched_a_kernel_calling_it(tmp_path):
    from harness.mutate.mutations import Target
    from harness.mutate.runner import tests_for

    path = tmp_path / "k.py"
    path.write_text(kernel("return x_ptr * 2", name="helper", args="x_ptr") + "\n\n"
                    + kernel("tl.store(y_ptr, helper(tl.load(x_ptr)))", name="calls_it") + "\n\n"
                    + kernel("tl.store(y_ptr, tl.load(x_ptr))", name="does_not"))
    f, other = str(path), str(tmp_path / "other.py")
    launched = {"t::a": [("k.calls_it", f)], "t::b": [("k.does_not", f)], "t::c": [("other.calls_it", other)],
                "t::d": [("k.does_not", f), ("k.calls_it", f)]}
    assert tests_for(Target(f, "helper"), launched) == ["t::a", "t::d"]
    assert tests_for(Target(f, "does_not"), launched) == ["t::b", "t::d"]
