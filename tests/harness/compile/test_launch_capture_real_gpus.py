"""Launch capture sees the launches real GPUs would make (issue 23), end to end with pytester (in process):
host-side arch dispatch (device personalities), dtype constexprs coupled to a pointer, atomics that fix a
pointer's type, int64-annotated scalars, FP8 output formats, autotuned kernels; and the costs: a size
group's representative and every outcome read back, so a warm run (also under ``-n 2``) compiles nothing.

Every inner test is a plain numerics test with zero compile-specific lines.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

# Imported before any in-process pytester run: pytester restores sys.modules afterwards, and a second import of
# triton's native extension in one process aborts.
import triton.compiler  # noqa: F401
import triton.language as tl

from harness.compile import disk_cache as dc
from harness.compile import launches as lc
from harness.compile import personality as pers

HERE = Path(__file__).resolve().parent
TQ = (HERE / "hostdispatch" / "tq_store.py").read_text()
PATTERNS = (HERE / "patterns" / "real_gpu_patterns.py").read_text()

pytestmark = [pytest.mark.interp_only, pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")]


def _run(pytester, monkeypatch, tmp_path, *args):
    monkeypatch.setenv("HARNESS_COMPILE_CACHE", str(tmp_path / "cache"))
    return pytester.runpytest("-p", "no:hypothesispytest", "-p", "no:cacheprovider", "--harness-lane=interp",
                              "--harness-compile-launches", *args)


def _row(result, kernel: str) -> list[str]:
    line = next(ln for ln in result.outlines if re.match(rf"\S*\.{kernel}\s", ln))
    return re.split(r"\s{2,}", line.strip())[1:]


# --- 1. host-side arch dispatch ------------------------------------------------------------------------------

_TQ_TEST = """
import torch
from tq_store import store

def test_store_fp16():
    key = (torch.arange(-16, 16, dtype=torch.float32) / 16).to(torch.float16)
    assert store(key, fixed={fixed}).shape == (32,)
"""


def test_host_chosen_format_is_flagged_for_bf16_before_sm89(pytester, monkeypatch, tmp_path):
    """The pre-fix turboquant pattern: the CPU box takes the e4nv branch (refused below sm89: `expected`); the
    replay as sm75/sm80/sm86 takes the e4b15 branch, whose bf16 variant does not compile there."""
    pytester.makepyfile(tq_store=TQ, test_tq=_TQ_TEST.format(fixed=False))
    result = _run(pytester, monkeypatch, tmp_path)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*tq_store.store_keys @ sm75,sm80,sm86: variant key_ptr=bf16 (the launch as run compiles) fails to "
        "compile [[]refused[]]",
        "*signature: key_ptr=[*]bf16, cache_ptr=[*]u8, n=i32",
        "*error: at tq_store.py:23:*is_fp16() or arg.type.scalar.is_fp32()*",
    ])
    assert _row(result, "store_keys") == ["FAIL 1"] * 3 + ["ok"] * 4


def test_host_chosen_format_fixed_kernel_is_clean(pytester, monkeypatch, tmp_path):
    pytester.makepyfile(tq_store=TQ, test_tq=_TQ_TEST.format(fixed=True))
    result = _run(pytester, monkeypatch, tmp_path)
    result.assert_outcomes(passed=1)
    # below sm89: the e4nv launch as run is an expected refusal, the A100's e4b15 launch compiles in every dtype
    assert _row(result, "store_keys_fixed") == ["ok*"] * 3 + ["ok"] * 4
    assert "not replayed" not in result.stdout.str()


def test_launchers_that_do_not_ask_are_not_replayed(monkeypatch):
    """No query, no replay: the cost stays with the kernels whose launchers branch on the device."""
    import torch

    m = _load("_harness_patterns", HERE / "patterns" / "real_gpu_patterns.py")
    state = lc.state()

    def test_body():
        m.amax(torch.ones(8))

    with state.queries.watching(), state.capture(test_body.__code__) as got:
        state.queries.asked = False
        test_body()
    assert len(got) == 1 and got.replays == []


def test_personalities_answer_as_the_target():
    p = pers.device_personality("sm80")
    assert p.answer("get_device_capability", (), {}) == (8, 0)
    assert p.answer("is_available", (), {}) is True
    props = p.answer("get_device_properties", (0,), {})
    assert (props.major, props.minor, props.name) == (8, 0, "NVIDIA A100-SXM4-80GB")
    assert pers.device_personality("gfx942") is None
    # a replay that asked only is_available() holds for every GPU target; one that asked the capability does not
    asked = [("is_available", (), True)]
    assert pers.same_answers(pers.device_personality("sm120"), asked)
    cap = [("get_device_capability", (), (8, 0))]
    assert pers.same_answers(pers.device_personality("sm80"), cap)
    assert not pers.same_answers(pers.device_personality("sm86"), cap)


# --- 2. dtype constexprs coupled to pointers; 4. atomics; 5. int64 scalars and FP8 outputs ----------------------

_PATTERN_TESTS = """
import torch
import real_gpu_patterns as k

def test_quant_fp16():
    assert k.quant(torch.ones(8, dtype=torch.float16)).shape == (8,)

def test_amax_fp32_scale():
    assert float(k.amax(torch.tensor([1.0, -3.0]))) == 3.0

def test_copy_i64():
    x = torch.arange(8, dtype=torch.float32)
    y = torch.empty_like(x)
    k.copy_i64[(1,)](x, y, 8, BLOCK=8)
    assert torch.equal(x, y)

def test_store_fp8_bf16():
    out = torch.empty(8, dtype=torch.float8_e4m3fn)
    k.store_fp8[(1,)](torch.ones(8, dtype=torch.bfloat16), out, 8, BLOCK=8)
"""


def _patterns(pytester, monkeypatch, tmp_path, test: str, *args):
    pytester.makepyfile(real_gpu_patterns=PATTERNS, test_patterns=_PATTERN_TESTS)
    return _run(pytester, monkeypatch, tmp_path, "--harness-targets=sm90", "-k", test, *args)


def test_dtype_constexpr_follows_its_pointer(pytester, monkeypatch, tmp_path):
    """torchao's pattern: the bf16 launch is x_ptr=bf16 *with* input_dtype=bf16, which takes the kernel's bf16
    path; widening the pointer alone compiled a launch nobody makes (and reported ok)."""
    result = _patterns(pytester, monkeypatch, tmp_path, "quant")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*patterns.quant_rows @ sm90: variant x_ptr=bf16+input_dtype (the launch as run "
                                 "compiles) fails to compile*"])
    assert "x_ptr=fp32+input_dtype (the launch" not in result.stdout.str()


def test_atomic_accumulator_is_not_widened(pytester, monkeypatch, tmp_path):
    result = _patterns(pytester, monkeypatch, tmp_path, "amax")
    result.assert_outcomes(passed=1)
    assert _row(result, "amax_rows") == ["ok"]
    # launch + x fp16 + x bf16: the fp32 amax_ptr keeps its type
    result.stdout.fnmatch_lines(["3 distinct compiles: *"])


def test_atomic_refusal_of_a_variant_is_not_a_finding(monkeypatch, tmp_path):
    """A pointer the source scan misses (an atomic reached through a helper): the compiler's "atomic_max does
    not support fp16" for a variant says the kernel cannot be widened so, which is no bug; the launch itself
    failing so still is one."""
    from harness.compile import findings as fd

    def outcome(launch, target, directory=None, budget=None):
        if launch.sig["s"] == "*fp32":
            return dc.Outcome(True)
        return dc.Outcome(False, "refused", "at k.py:9:4 `tl.atomic_max(s, m)`: ValueError: atomic_max does not "
                                            f"support {launch.sig['s'][1:]}")

    monkeypatch.setattr(fd, "launch_outcome", outcome)
    launch = lc.Launch("m.k", __file__, (("s", "*fp32"),), ())
    assert fd.check(launch, ["sm90"], declarations=lc.Declarations()) == []
    half = lc.Launch("m.k", __file__, (("s", "*fp16"),), ())
    assert [f.variant for f in fd.check(half, ["sm90"], widen=False, declarations=lc.Declarations())] == [""]


def test_atomic_pointers_follow_local_pointer_arithmetic():
    m = _load("_harness_patterns", HERE / "patterns" / "real_gpu_patterns.py")
    assert lc.atomic_pointers(m.amax_rows) == {"amax_ptr"}
    assert lc.atomic_pointers(m.quant_rows) == frozenset()


def test_int64_annotation_types_the_scalar():
    import torch

    m = _load("_harness_patterns", HERE / "patterns" / "real_gpu_patterns.py")
    x = torch.zeros(8)
    launch = lc.launch_from_args(m.copy_i64, (x, x, 8), {"BLOCK": 8})
    assert launch.sig["n"] == "i64"  # Triton's launcher types it by the annotation, whatever the value


def test_fp8_output_formats_are_widened(pytester, monkeypatch, tmp_path):
    """bf16 stored into an e4nv tensor compiles; the same store into e4b15 does not."""
    result = _patterns(pytester, monkeypatch, tmp_path, "store_fp8")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*patterns.store_fp8 @ sm90: variant out_ptr=fp8e4b15 (the launch as run "
                                 "compiles) fails to compile*"])
    assert "out_ptr=fp8e5 (the launch" not in result.stdout.str()


def test_variant_labels_for_coupled_and_fp8_widening():
    def launch(sig, consts=()):
        return lc.Launch("m.k", __file__, tuple(sig.items()), tuple(consts))

    got = [lab for lab, _ in lc.variants(launch({"x": "*fp16", "y": "*fp8e4nv"}, [("IN", tl.float16)]))]
    assert got == ["x=bf16+IN", "x=fp32+IN", "y=fp8e5", "y=fp8e4b15"]
    # two pointers of the launched type: the constexpr follows only the all= variants
    got = [lab for lab, _ in lc.variants(launch({"a": "*fp16", "b": "*fp16"}, [("IN", tl.float16)]))]
    assert got == ["a=bf16", "a=fp32", "b=bf16", "b=fp32", "all=bf16+IN", "all=fp32+IN"]
    # an FP8 format constexpr no pointer carries: the other formats
    got = [lab for lab, _ in lc.variants(launch({"y": "*u8"}, [("FMT", tl.float8e5)]))]
    assert got == ["FMT=fp8e4nv", "FMT=fp8e4b15"]
    (_, v), *_ = lc.variants(launch({"x": "*fp16"}, [("IN", tl.float16)]))
    assert v.sig["x"] == "*bf16" and dict(v.constexprs)["IN"] == tl.bfloat16


# --- 3. autotune ------------------------------------------------------------------------------------------------

_TUNED_TEST = """
import torch
import real_gpu_patterns as k

def test_scale():
    x = torch.arange(100, dtype=torch.float32)
    assert torch.equal(k.scale(x, 2.0), 2 * x)
"""


def test_autotuned_kernel_runs_and_every_config_is_compiled(pytester, monkeypatch, tmp_path):
    pytester.makepyfile(real_gpu_patterns=PATTERNS, test_tuned=_TUNED_TEST)
    result = _run(pytester, monkeypatch, tmp_path, "--harness-targets=sm90", "--harness-no-widen")
    result.assert_outcomes(passed=1)  # it was: RuntimeError: 0 active drivers (the autotuner benchmarks)
    # four configs (BLOCK 32/128 x num_warps 1/4): a config's tile is never collapsed as a size. The first through
    # ptxas, the others through the frontend, where warps change nothing (BLOCK=128 with 1 and 4 warps share one)
    result.stdout.fnmatch_lines(["3 distinct compiles: *"])
    full = _run(pytester, monkeypatch, tmp_path, "--harness-targets=sm90", "--harness-no-widen",
                "--harness-compile-depth=full")
    full.stdout.fnmatch_lines(["4 distinct compiles: *"])  # each config through ptxas


_EACH_TEST = """
import torch
import real_gpu_patterns as k

def test_configs_run():
    ran = []
    for c in k.scale_tuned.configs:
        c.pre_hook = lambda nargs, c=c: ran.append(c.kwargs["BLOCK"])
    x = torch.arange(100, dtype=torch.float32)
    assert torch.equal(k.scale(x, 2.0), 2 * x)
    assert len(ran) == {runs}
"""


@pytest.mark.parametrize("mode, runs", [("first", 1), ("each", 4)])
def test_autotune_option_runs_one_or_each_config(pytester, monkeypatch, tmp_path, mode, runs):
    pytester.makepyfile(real_gpu_patterns=PATTERNS, test_tuned=_EACH_TEST.format(runs=runs))
    result = _run(pytester, monkeypatch, tmp_path, "--harness-targets=sm90", "--harness-no-widen",
                  f"--harness-autotune={mode}")
    result.assert_outcomes(passed=1)


# --- 7. cost: deterministic representatives, nothing compiled twice --------------------------------------------

def test_size_group_representative_is_the_recorded_one(tmp_path):
    def launch(block):
        return lc.Launch("m.k", __file__, (("x", "*fp16"),), (("BLOCK", block), ("FLAG", 1)))

    assert dc.representative(launch(128), tmp_path) == launch(128)
    assert dc.representative(launch(64), tmp_path) == launch(128)  # whichever a worker meets first later
    assert dc.representative(launch(64), tmp_path / "fresh") == launch(64)
    pinned = lc.Launch("m.k", __file__, (("x", "*fp16"),), (("BLOCK", 64),), pinned=("BLOCK",))
    assert dc.representative(pinned, tmp_path) is pinned  # an autotune tile is never collapsed


_SIZES = """
import torch, triton.language as tl
from fp8_store import store_fixed

def test_sizes_{i}():
    for block in {sizes}:  # a size constexpr: one configuration
        x = torch.zeros(block, dtype=torch.float16)
        store_fixed[(1,)](x, torch.empty(block, dtype=torch.uint8), block, FMT=tl.float8e4b15, BLOCK=block)
"""


def test_warm_rerun_under_xdist_compiles_nothing(pytester, monkeypatch, tmp_path):
    """A size group's launches met first in another order (a first run met BLOCK 8 first, the next meets 16
    first): the representative recorded on disk is compiled, so the warm runs compile nothing, and a warm run
    under ``-n 2`` (whichever worker meets which size first) counts the totals of one process."""
    pytest.importorskip("xdist")
    pytester.makepyfile(fp8_store=(HERE / "widening" / "fp8_store.py").read_text(),
                        test_a=_SIZES.format(i="a", sizes=(8, 16)), test_b=_SIZES.format(i="b", sizes=(16, 8)))
    monkeypatch.setenv("HARNESS_COMPILE_CACHE", str(tmp_path / "cache"))
    args = ("-p", "no:hypothesispytest", "-p", "no:cacheprovider", "--harness-lane=interp",
            "--harness-compile-launches", "--harness-targets=sm80,sm90")
    pytester.runpytest_subprocess(*args, "-k", "sizes_a").assert_outcomes(passed=1)
    b_first = pytester.runpytest_subprocess(*args, "-k", "sizes_b")  # meets BLOCK 16 first: reads 8's outcomes
    b_first.assert_outcomes(passed=1)
    one = next(ln for ln in b_first.outlines if "distinct compiles" in ln)
    total = int(one.split()[0])
    assert one.startswith(f"{total} distinct compiles: 0 compiled, {total} read from the disk cache"), one
    # test_a and test_b launch the same sizes: the whole suite has test_b's distinct compiles
    xdist = pytester.runpytest_subprocess(*args, "-n", "2", "-p", "xdist")
    xdist.assert_outcomes(passed=2)
    line = next(ln for ln in xdist.outlines if "distinct compiles" in ln)
    assert line.startswith(f"{total} distinct compiles: 0 compiled, {total} read from the disk cache"), (one, line)


def _load(name, path):
    import importlib.util
    import sys

    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]
