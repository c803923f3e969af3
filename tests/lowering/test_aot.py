"""The recorder and launcher of another Triton's compiled pattern kernels (:mod:`tests.lowering.aot`): what can be
checked without a GPU. The manifest holds each launch as Triton's JIT specializes it, the packed parameters fit the
compiled PTX entry's ``.param`` list, and a launch that is not the recorded one is refused before anything runs.
The cupy launch itself runs only on a GPU (``scripts/capture_lowering_goldens.py --compiled``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from harness.interp.patch import Patch  # noqa: E402
from tests.lowering import aot, kernels  # noqa: E402

#: one case each: scalars of both types (affine), an N not divisible by 16 (layernorm), two outputs (argmax)
CASES = [("affine", "fp32_n1024_w4"), ("layernorm", "fp32_n1000_w4"), ("row_max_argmax", "fp32_n128_w1_nan")]

PTX = """
.version 9.4
.target sm_90a
.address_size 64
.visible .entry affine(
\t.param .u64 .ptr .global .align 1 affine_param_0,
\t.param .u64 .ptr .global .align 1 affine_param_1,
\t.param .f32 affine_param_2,
\t.param .f32 affine_param_3,
\t.param .u32 affine_param_4,
\t.param .u64 .ptr .global .align 1 affine_param_5,
\t.param .u64 .ptr .global .align 1 affine_param_6
)
.reqntid 128
{
}
"""
SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "s": "fp32", "b": "fp32", "N": "i32"}


def _params(pattern: str, case: str) -> dict:
    return dict(kernels.PATTERNS[pattern])[case]


def _replay(on_launch, cases=CASES) -> None:  # noqa: ANN001 - a Recorder or Launcher-like callable
    """Run ``cases`` with every launch handed to ``on_launch`` instead of Triton."""
    with Patch.context() as patch:
        aot.hook(patch, type(kernels.affine), on_launch)
        for pattern, case in cases:
            p = _params(pattern, case)
            on_launch.begin(pattern, case)
            kernels.launch(pattern, p, kernels.make_inputs(pattern, p), "cpu")
            if hasattr(on_launch, "end"):
                on_launch.end()


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):  # noqa: ANN001, ANN201
    out = tmp_path_factory.mktemp("aot")
    rec = aot.Recorder(out)
    _replay(rec)
    rec.write()
    return out


def test_ptx_params_reads_the_entry():
    assert aot.ptx_params(PTX, "affine") == [(".u64", True)] * 2 + [(".f32", False)] * 2 + [(".u32", False)] + \
        [(".u64", True)] * 2
    assert aot.ptx_header(PTX) == {"version": "9.4", "target": "sm_90a"}
    with pytest.raises(ValueError, match="no .entry 'softmax'"):
        aot.ptx_params(PTX, "softmax")


def test_param_plan_refuses_what_the_entry_does_not_take():
    ptx = aot.ptx_params(PTX, "affine")
    plan = aot.param_plan("affine", SIG, ptx)
    assert [(p["name"], p["ptx"]) for p in plan] == [("x_ptr", ".u64"), ("y_ptr", ".u64"), ("s", ".f32"),
                                                     ("b", ".f32"), ("N", ".u32"), ("global_scratch", ".u64"),
                                                     ("profile_scratch", ".u64")]
    with pytest.raises(aot.LaunchMismatch, match="takes 7 parameters.*would pass 6"):
        aot.param_plan("affine", {k: v for k, v in SIG.items() if k != "N"}, ptx)
    with pytest.raises(aot.LaunchMismatch, match=r"parameter 4 \(N, Triton i64\) is packed as .u64.*declares .u32"):
        aot.param_plan("affine", dict(SIG, N="i64"), ptx)
    with pytest.raises(aot.LaunchMismatch, match=r"parameter 2 \(s, Triton \*fp32\).*declares .f32"):
        aot.param_plan("affine", dict(SIG, s="*fp32"), ptx)
    with pytest.raises(aot.LaunchMismatch, match="argument 'N' has Triton type 'fp16'"):
        aot.param_plan("affine", dict(SIG, N="fp16"), ptx)


def test_pack_types_and_checks_every_value():
    plan = aot.param_plan("affine", SIG, aot.ptx_params(PTX, "affine"))
    x, y = torch.zeros(8), torch.zeros(8)
    args = {"x_ptr": x, "y_ptr": y, "s": 1.37, "b": -0.41, "N": 4096}
    got = aot.pack("affine", plan, args, {"s": 1.37, "b": -0.41, "N": 4096}, scratch=(0, 64))
    assert [type(v) for v in got] == [np.uint64, np.uint64, np.float32, np.float32, np.int32, np.uint64, np.uint64]
    assert got[0] == x.data_ptr() and got[1] == y.data_ptr() and got[6] == 64
    assert got[2] == np.float32(1.37) and got[4] == 4096
    recorded = {"s": 1.37, "b": -0.41, "N": 4096}
    with pytest.raises(aot.LaunchMismatch, match="'s' is 1.5; it was compiled with 1.37"):
        aot.pack("affine", plan, dict(args, s=1.5), recorded)
    with pytest.raises(aot.LaunchMismatch, match="'N' was compiled as a i32 scalar, the launch passes Tensor"):
        aot.pack("affine", plan, dict(args, N=x), recorded)
    with pytest.raises(aot.LaunchMismatch, match="'y_ptr' was compiled as a pointer"):
        aot.pack("affine", plan, dict(args, y_ptr=3), recorded)
    with pytest.raises(aot.LaunchMismatch, match="passes no argument 'b'"):
        aot.pack("affine", plan, {k: v for k, v in args.items() if k != "b"}, recorded)
    with pytest.raises(aot.LaunchMismatch, match="does not fit i32"):
        aot.pack("affine", plan, dict(args, N=2**31), dict(recorded, N=2**31))


def test_recorder_writes_each_launch_as_the_jit_specializes_it(compiled):
    m = json.loads((compiled / "manifest.json").read_text())
    assert m["format"] == aot.FORMAT and m["arch"] == "sm90" and m["ptxas"]
    (affine,) = m["launches"]["affine"]["fp32_n1024_w4"]
    assert affine["grid"] == [4, 1, 1] and affine["scalars"] == {"s": 1.37, "b": -0.41, "N": 4096}
    k = m["kernels"][affine["key"]]
    assert [p["name"] for p in k["params"]] == ["x_ptr", "y_ptr", "s", "b", "N", "global_scratch", "profile_scratch"]
    assert k["specialization"]["signature"] == [["x_ptr", "*fp32"], ["y_ptr", "*fp32"], ["s", "fp32"],
                                                ["b", "fp32"], ["N", "i32"]]
    assert k["specialization"]["divisible"] == ["N", "x_ptr", "y_ptr"] and k["num_warps"] == 4
    assert k["target"] == "sm_90a"
    assert (compiled / k["cubin"]).read_bytes()[:4] == b"\x7fELF"
    assert ".entry affine(" in (compiled / k["ptx"]).read_text()
    (ln,) = m["launches"]["layernorm"]["fp32_n1000_w4"]
    spec = m["kernels"][ln["key"]]["specialization"]
    assert "N" not in spec["divisible"] and spec["constexprs"] == {"BLOCK_N": "1024"} and ln["grid"] == [16, 1, 1]
    (am,) = m["launches"]["row_max_argmax"]["fp32_n128_w1_nan"]
    assert m["kernels"][am["key"]]["num_warps"] == 1 and am["scalars"] == {}


def test_recorded_cubins_are_what_tritons_jit_builds(compiled):
    m = json.loads((compiled / "manifest.json").read_text())
    assert all(k["jit_check"].split(" identical to Triton's JIT")[0] in ("cubin", "SASS")
               for k in m["kernels"].values())
    # and independently of the recorder: the JIT's own compile of the w1 launch, for sm90, is the recorded cubin
    p = _params("row_max_argmax", "fp32_n128_w1_nan")
    seen = []
    with Patch.context() as patch:
        aot.hook(patch, type(kernels.affine), lambda fn, args, kwargs, grid: seen.append((fn, args, kwargs)))
        kernels.launch("row_max_argmax", p, kernels.make_inputs("row_max_argmax", p), "cpu")
    ((fn, args, kwargs),) = seen
    jit = aot.jit_compiled(fn, args, kwargs, "sm90")
    (am,) = m["launches"]["row_max_argmax"]["fp32_n128_w1_nan"]
    entry = m["kernels"][am["key"]]
    assert jit.metadata.num_warps == 1 and jit.metadata.target.arch == 90
    assert aot.same_code(bytes(jit.asm["cubin"]), (compiled / entry["cubin"]).read_bytes()) is not None
    other = m["kernels"][m["launches"]["affine"]["fp32_n1024_w4"][0]["key"]]
    assert aot.same_code(bytes(jit.asm["cubin"]), (compiled / other["cubin"]).read_bytes()) is None


def test_recorder_refuses_a_compile_the_jit_would_not_make(tmp_path):
    """The recorder's compile and the JIT's disagree (here: the JIT is handed num_warps 8 for a 4-warp launch):
    nothing is recorded."""
    real = aot.jit_compiled
    rec = aot.Recorder(tmp_path)
    with Patch.context() as patch:
        patch.setattr(aot, "jit_compiled", lambda fn, args, kwargs, arch: real(fn, args, dict(kwargs, num_warps=8),
                                                                                arch), tag="test-aot")
        with pytest.raises(aot.LaunchMismatch, match="other code than the recorder's compile.*num_warps=8"):
            _replay(rec, [("affine", "fp32_n1024_w4")])
    assert rec.manifest["kernels"] == {} and not list(tmp_path.iterdir())


def test_launcher_takes_the_recorded_launches(compiled):
    launcher = aot.Launcher(compiled)
    seen = []

    class Resolve:
        def begin(self, pattern: str, case: str) -> None:
            launcher.begin(pattern, case)

        def end(self) -> None:
            launcher.end()

        def __call__(self, fn, args, kwargs, grid):  # noqa: ANN001, ANN204
            seen.append(launcher.resolve(fn, args, kwargs, grid))

    _replay(Resolve())
    assert [e["name"] for e, _, _ in seen] == ["affine", "layernorm", "row_max_argmax"]
    assert [len(params) for _, _, params in seen] == [5, 6, 3]


def _affine_launch(**change):  # noqa: ANN202
    x = torch.zeros(4096)
    args = {"x_ptr": x, "y_ptr": torch.empty_like(x), "s": 1.37, "b": -0.41, "N": 4096}
    args.update({k: v for k, v in change.items() if k in args})
    kwargs = {"BLOCK": 1024, "num_warps": change.get("num_warps", 4)}
    return tuple(args.values()), kwargs, change.get("grid", (4,))


@pytest.mark.parametrize(("change", "match"), [
    ({}, None),
    ({"grid": (5,)}, r"grid \[5, 1, 1\], recorded \[4, 1, 1\]"),
    ({"num_warps": 8}, "num_warps: recorded 4, this launch 8"),
    ({"x_ptr": torch.zeros(4097)[1:]}, "divisible: recorded"),
    ({"N": 4095}, "divisible: recorded"),  # N no longer divisible by 16: another specialization
    ({"s": 1.5}, "'s' is 1.5; it was compiled with 1.37"),
    ({"y_ptr": torch.zeros(4096, dtype=torch.float16)}, r"signature: recorded .*\*fp16"),
])
def test_launcher_refuses_a_launch_that_is_not_the_recorded_one(compiled, change, match):
    launcher = aot.Launcher(compiled)
    launcher.begin("affine", "fp32_n1024_w4")
    args, kwargs, grid = _affine_launch(**change)
    if match is None:
        launcher.resolve(kernels.affine, args, kwargs, grid)
        launcher.end()
        return
    with pytest.raises(aot.LaunchMismatch, match=match):
        launcher.resolve(kernels.affine, args, kwargs, grid)


def test_launcher_refuses_missing_extra_and_other_launches(compiled, tmp_path):
    launcher = aot.Launcher(compiled)
    launcher.begin("affine", "fp32_n1024_w4")
    with pytest.raises(aot.LaunchMismatch, match="1 recorded launches were not made"):
        launcher.end()
    args, kwargs, grid = _affine_launch()
    with pytest.raises(aot.LaunchMismatch, match="the recorded launch here is tests.lowering.kernels.affine"):
        launcher.resolve(kernels.fma_elementwise, args, kwargs, grid)
    with pytest.raises(aot.LaunchMismatch, match="a launch of tests.lowering.kernels.affine that was not recorded"):
        launcher.resolve(kernels.affine, args, kwargs, grid)
    with pytest.raises(aot.LaunchMismatch, match="softmax/fp32_n1024_w4: not in"):
        launcher.begin("softmax", "fp32_n1024_w4")
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "lowering-aot-0"}))
    with pytest.raises(aot.LaunchMismatch, match="has format 'lowering-aot-0'"):
        aot.Launcher(tmp_path)
