"""The GPU lane's warm start (``harness.compile.warm``): a launch recorded from a compile is compiled again by
``python -m harness compile --warm`` into Triton's cache, where the JIT's own specialization of the same call
finds it. No GPU here: the "launch" is Triton's binder and ``_pack_args`` on CPU tensors, compiled for sm90 as
``JITFunction._do_compile`` compiles it (the GPU's launch path, less the driver), each step in a process of
its own with ``TRITON_INTERPRET=0``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.__main__ import main
from harness.compile import background
from harness.compile.warm import FORMAT, Listener, read_manifest, write_manifest

pytestmark = pytest.mark.lane_independent  # compiles on the CPU only: the same on every lane

ROOT = Path(__file__).resolve().parents[3]

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, s, BLOCK: tl.constexpr, OUT: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(y_ptr + o, (tl.load(x_ptr + o, mask=m) * s).to(OUT), mask=m)
'''

# Triton's launch path without a driver: the binder JITFunction.run builds (create_function_from_signature),
# _pack_args, then triton.compile(ASTSource(...), target, options.__dict__) as _do_compile calls it.
LAUNCHER = '''
import sys
import torch
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.compiler.compiler import make_backend
from triton.runtime.jit import create_function_from_signature

from harness.compile.warm import Listener, install_listener, write_manifest
from harness.interp.patch import Patch
import kmod


def launch(fn, args, kwargs, target):
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, spec, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, spec, options)
    triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target, options=options.__dict__)


listener = Listener(record=sys.argv[1] == "record")
install_listener(Patch(), listener)  # for the whole script
x, y = torch.zeros(1024), torch.zeros(1024, dtype=torch.bfloat16)
sm90 = GPUTarget("cuda", 90, 32)
launch(kmod.scale_kernel, (x, y, 1000, 2.0), dict(BLOCK=128, OUT=tl.bfloat16, num_warps=8), sm90)
launch(kmod.scale_kernel, (x, y, 1024, 2.0), dict(BLOCK=256, OUT=tl.bfloat16), sm90)
if sys.argv[1] == "record":
    write_manifest(sys.argv[2], listener.entries.values())
print("counts", listener.counts()["compiled"], listener.counts()["cached"])
'''


def _run(args: list[str], cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRITON_CACHE_DIR": str(cache), "TRITON_INTERPRET": "0",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(cwd), str(ROOT), os.environ.get("PYTHONPATH")]))}
    p = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return p


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A project with one kernel, two launches of it recorded into ``launches.json``."""
    d = tmp_path_factory.mktemp("warm")
    (d / "kmod.py").write_text(KERNEL)
    (d / "launch.py").write_text(LAUNCHER)
    p = _run(["launch.py", "record", "launches.json"], d, d / "cache-record")
    assert "counts 2 0" in p.stdout
    return d


def _counts(p: subprocess.CompletedProcess[str]) -> tuple[int, int]:
    line = next(x for x in p.stdout.splitlines() if x.startswith("counts "))
    compiled, cached = map(int, line.split()[1:])
    return compiled, cached


def test_the_manifest_holds_each_specialization_with_its_options(recorded):
    header, entries = read_manifest(recorded / "launches.json")
    assert header["format"] == FORMAT and header["target"] == "sm90"
    assert len(entries) == 2
    by_block = {dict((tuple(k), v) for k, v in e["constexprs"])[(4,)]: e for e in entries}
    assert by_block[128]["options"] == {"num_warps": 8}  # only what differs from the backend's defaults
    assert by_block[256]["options"] == {}
    assert [k for k, _ in by_block[128]["signature"]] == ["x_ptr", "y_ptr", "n", "s", "BLOCK", "OUT"]
    assert dict((tuple(k), v) for k, v in by_block[128]["constexprs"])[(5,)] == {"dtype": "bf16"}
    # n=1000 is not a multiple of 16, n=1024 is: two specializations of the same constexprs but for BLOCK
    attrs = {b: dict((tuple(k), v) for k, v in e["attrs"]) for b, e in by_block.items()}
    assert attrs[256][(2,)] == [["tt.divisibility", 16]] and not attrs[128][(2,)]
    assert all(e["module"] == "kmod" and e["qualname"] == "scale_kernel" and e["file"] for e in entries)


def test_a_launch_after_the_warm_start_reads_the_cache(recorded, tmp_path):
    # The recording run compiled both into its own empty cache ("counts 2 0"): the check can tell.
    warm = tmp_path / "warm"
    p = _run(["-m", "harness", "compile", "--warm", "launches.json", "--jobs", "1"], recorded, warm)
    assert "2 launches from launches.json for sm90: 2 compiled, 0 already cached" in p.stdout
    assert f"Triton cache {warm}" in p.stdout
    assert _counts(_run(["launch.py", "check"], recorded, warm)) == (0, 2)


def test_entries_that_no_longer_fit_or_compile_are_named(recorded, tmp_path):
    _, entries = read_manifest(recorded / "launches.json")
    gone = dict(entries[0], module="kmod_gone", file="kmod_gone.py")
    renamed = dict(entries[1], signature=[["a_ptr" if k == "x_ptr" else k, v] for k, v in entries[1]["signature"]])
    other = dict(entries[0], target="sm80")
    odd = dict(entries[0], constexprs=[[[4], 100] if k == [4] else [k, v] for k, v in entries[0]["constexprs"]])
    write_manifest(recorded / "stale.json", [gone, renamed, other, odd])
    p = _run(["-m", "harness", "compile", "--warm", "stale.json", "--warm-target", "sm90", "--jobs", "1"],
             recorded, tmp_path / "c")
    assert ("4 launches from stale.json for sm90: 0 compiled, 0 already cached, 1 failed, 2 skipped, 1 other "
            "target") in p.stdout
    # the compiler's refusal is an outcome (the launch will meet it too), with its first line
    assert "failed: kmod.scale_kernel: CompilationError: " in p.stdout
    assert "skipped: kmod_gone.scale_kernel: ModuleNotFoundError: No module named 'kmod_gone'" in p.stdout
    assert ("skipped: kmod.scale_kernel: ValueError: the manifest's arguments (a_ptr, y_ptr, n, s, BLOCK, OUT) "
            "no longer match the kernel's (x_ptr, y_ptr, n, s, BLOCK, OUT)") in p.stdout


def _bad(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "m.json"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    "text, match",
    [
        ("{", "not a launch manifest (expected JSON written by --harness-record-launches)"),
        ('{"format": 0, "launches": []}', "manifest format 0, expected 1 (record it again)"),
        ('{"format": 1, "launches": {}}', "'launches' must be a list of entries, got dict"),
        ('{"format": 1, "launches": [{"module": "m"}]}', "launches[0] lacks qualname, file, target, signature"),
    ],
)
def test_a_bad_manifest_is_refused_by_name(tmp_path, text, match):
    path = _bad(tmp_path, text)
    with pytest.raises(ValueError) as e:
        read_manifest(path)
    assert str(e.value).startswith(f"{path}: ") and match in str(e.value)


def test_a_missing_manifest_names_how_to_record_one(tmp_path):
    with pytest.raises(ValueError, match="no such manifest .*--harness-record-launches="):
        read_manifest(tmp_path / "none.json")


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--warm", "{m}", "--sig", "x=*fp16"], "--warm compiles a manifest's launches: --sig cannot be given with it"),
        (["k.py::k", "--warm", "{m}"], "a kernel cannot be given with it"),
        (["--warm", "{m}", "--jobs", "-1"], "--jobs: expected a number of processes (0: the CPU count), got -1"),
        (["--warm", "{none}"], "no such manifest"),
        (["--warm", "{m}", "--warm-target", "sm91"], "cannot compile for sm91"),
        (["--warm", "{untargeted}"], "the manifest names no target; give --warm-target (e.g. sm90)"),
        ([], "expected MODULE_OR_FILE::KERNEL and --sig NAME=TYPE,... (or --warm MANIFEST)"),
    ],
)
def test_warm_usage_errors_exit_2(tmp_path, capsys, argv, match):
    untargeted = tmp_path / "u.json"
    write_manifest(untargeted, [])  # no launches: no target to take from them
    m = tmp_path / "m.json"
    m.write_text(json.dumps({**json.loads(untargeted.read_text()), "target": "sm90"}))
    names = {"m": str(m), "none": str(tmp_path / "none.json"), "untargeted": str(untargeted)}
    rc = main(["compile", *[a.format(**names) for a in argv]])
    assert rc == 2
    assert match in capsys.readouterr().err


def test_missing_ok_says_nothing_was_warmed(tmp_path, capsys):
    rc = main(["compile", "--warm", str(tmp_path / "none.json"), "--missing-ok"])
    assert rc == 0
    assert "no manifest" in capsys.readouterr().out


def test_a_kernel_defined_in_a_function_is_not_recorded():
    fn = SimpleNamespace(__qualname__="test.<locals>.k", __module__="m")
    src = SimpleNamespace(fn=SimpleNamespace(fn=fn), signature={}, constants={}, attrs={})
    listener = Listener(record=True)
    listener(src=src, metadata={"target": None}, times=None, cache_hit=False)
    assert listener.counts()["compiled"] == 1 and not listener.entries
    assert listener.not_recorded == {"test.<locals>.k": "test.<locals>.k is defined inside a function: nothing "
                                                         "can import it"}


def test_recording_is_refused_on_the_interpreter_lane(pytester):
    pytester.makepyfile("def test_x():\n    pass\n")
    r = pytester.runpytest("-p", "no:cacheprovider", "--harness-lane=interp", "--harness-record-launches=m.json")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--harness-record-launches records the kernels a GPU compiles; the interpreter lane "
                            "compiles none (run it with --harness-lane=gpu)*"])


def test_manifest_is_one_launch_a_line(tmp_path):
    e = {"module": "m", "qualname": "k", "file": "m.py", "target": "sm90", "signature": [["x", "*fp32"]],
         "constexprs": [], "attrs": [], "options": {}}
    assert write_manifest(tmp_path / "m.json", [e, dict(e), dict(e, qualname="k2")]) == 2
    lines = (tmp_path / "m.json").read_text().splitlines()
    assert sum(1 for x in lines if x.startswith('  {"module"')) == 2
    assert read_manifest(tmp_path / "m.json")[1] == [e, dict(e, qualname="k2")]


AOT_TEST = '''
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def fill(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)


def test_compile():
    src = ASTSource(fill, {"x_ptr": "*fp32", "BLOCK": "constexpr"}, {"BLOCK": 32}, {(0,): [["tt.divisibility", 16]]})
    for _ in range(2):
        triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 2})
'''


def test_the_gpu_lane_counts_its_compiles_and_records_them(pytester, monkeypatch, tmp_path):
    """A GPU faked for the lane choice (a plugin says torch sees one; nothing is launched, the test compiles for
    sm90 as a launch would, twice: the second is read from Triton's cache), in a child process: the lane's
    summary counts both, and --harness-record-launches writes the one specialization."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(pytester.path), os.environ.get("PYTHONPATH")])))
    pytester.makepyfile(test_aot=AOT_TEST, fakegpu="import torch\ntorch.cuda.is_available = lambda: True\n")
    result = pytester.runpytest_subprocess("-p", "fakegpu", "-p", "no:cacheprovider", "--harness-lane=gpu",
                                           "--harness-arch=sm90", "--harness-record-launches=m.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "harness: Triton compiled 1 kernels in this run (*s, slowest *s) and read 1 from its on-disk cache",
        "harness: recorded 1 kernel specializations to m.json (python -m harness compile --warm m.json compiles "
        "them before a run)",
    ])
    _, entries = read_manifest(pytester.path / "m.json")
    assert [(e["module"], e["qualname"], e["target"], e["options"]) for e in entries] == [
        ("test_aot", "fill", "sm90", {"num_warps": 2})]
    assert entries[0]["file"] == "test_aot.py"  # relative to the rootdir


# --------------------------------------------------- found by mutating harness/compile/warm.py (in process)

def test_constexpr_values_round_trip_through_their_manifest_form(tmp_path, monkeypatch):
    import math

    import triton.language as tl

    from harness.compile.warm import _decode, _encode, _unwrap

    def trip(v):
        return _decode(json.loads(json.dumps(_encode(v))))

    for v in (None, True, False, 7, "s", 1.5, -0.0, float("inf"), (1, (2.5, "x")), tl.bfloat16, tl.float8e4nv):
        got = trip(v)
        assert got == v and type(got) is type(v), v
    assert math.copysign(1, trip(-0.0)) == -1 and math.isnan(trip(float("nan")))
    assert _encode(tl.float8e5) == {"dtype": "fp8e5"} and _encode(tl.constexpr(4)) == {"constexpr": 4}
    c = trip(tl.constexpr(tl.float16))
    assert isinstance(c, tl.constexpr) and c.value == tl.float16
    # a module-level kernel is named by module and qualname, and imported back
    (tmp_path / "wk_values.py").write_text(KERNEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # a JITFunction, as on the GPU lane (nothing is compiled)
    monkeypatch.delitem(sys.modules, "wk_values", raising=False)
    import wk_values

    assert _encode(wk_values.scale_kernel) == {"jit": ["wk_values", "scale_kernel"]}
    assert trip(wk_values.scale_kernel) is _unwrap(wk_values.scale_kernel)


@pytest.mark.parametrize("value, kind", [
    (object(), "object"),
    (SimpleNamespace(name="bf16"), "SimpleNamespace"),  # a name alone does not make a dtype
    (SimpleNamespace(fn=SimpleNamespace(__qualname__="k", __module__="m")), "SimpleNamespace"),  # no cache_key
    (SimpleNamespace(cache_key="x", fn=SimpleNamespace(__qualname__="t.<locals>.k", __module__="m")),
     "SimpleNamespace"),
])
def test_a_value_without_a_manifest_form_is_refused(value, kind):
    from harness.compile.warm import _encode

    with pytest.raises(TypeError, match=f"^a constexpr of type {kind} has no manifest form$"):
        _encode(value)


def test_an_unknown_value_form_is_refused():
    from harness.compile.warm import _decode

    with pytest.raises(ValueError, match=r"unknown value form \['what'\]"):
        _decode({"what": 1})


@pytest.mark.parametrize("target, name", [
    (SimpleNamespace(backend="cuda", arch=90, warp_size=32), "sm90"),
    ({"backend": "cuda", "arch": 120}, "sm120"),
    ({"backend": "hip", "arch": "gfx942"}, "gfx942"),
    (SimpleNamespace(backend="hip", arch="gfx950"), "gfx950"),
    ({"backend": "cuda", "arch": "90"}, None),
    ({"backend": "hip", "arch": 942}, None),
    ({"backend": "cpu", "arch": 90}, None),
    (None, None),
])
def test_target_names(target, name):
    from harness.compile.warm import _target_name

    assert _target_name(target) == name


def test_entry_of_refuses_what_is_not_a_jit_source():
    from harness.compile.warm import entry_of

    for src in (SimpleNamespace(), SimpleNamespace(fn=SimpleNamespace(fn=lambda: 0)),
                SimpleNamespace(signature={})):
        with pytest.raises(TypeError, match="not a @triton.jit source"):
            entry_of(src, {})
    fn = SimpleNamespace(__qualname__="k", __module__="m")
    with pytest.raises(ValueError, match="target 'tpu' is neither CUDA nor ROCm"):
        entry_of(SimpleNamespace(fn=SimpleNamespace(fn=fn), signature={}), {"target": "tpu"})


def test_the_listener_counts_compiles_and_their_seconds():
    fn = SimpleNamespace(__qualname__="t.<locals>.k", __module__="m")
    src = SimpleNamespace(fn=SimpleNamespace(fn=fn), signature={}, constants={}, attrs={})
    listener = Listener()  # counting only: nothing recorded, nothing refused
    for total, hit in ((2_500_000, False), (500_000, False), (9_000_000, True)):
        listener(src=src, metadata={}, times=SimpleNamespace(total=total), cache_hit=hit)
    assert listener.counts() == {"compiled": 2, "cached": 1, "seconds": 3.0, "slowest": 2.5}
    assert listener.entries == {} and listener.not_recorded == {}
    listener(src=src, metadata={}, times=SimpleNamespace(total=1234), cache_hit=False)
    assert listener.counts()["seconds"] == 3.001  # microseconds, rounded to the millisecond


def test_the_listener_chains_and_its_undo_leaves_a_later_one(monkeypatch):
    from triton import knobs

    from harness.compile.warm import install_listener
    from harness.interp.patch import Patch

    calls = []
    monkeypatch.setattr(knobs.compilation, "listener", lambda **kw: calls.append(("before", kw["n"])))
    with Patch.context() as patch:
        install_listener(patch, lambda **kw: calls.append(("ours", kw["n"])))
        knobs.compilation.listener(n=1)
        assert calls == [("ours", 1), ("before", 1)]
    knobs.compilation.listener(n=2)
    assert calls[-1] == ("before", 2) and len(calls) == 3
    with Patch.context() as patch:
        install_listener(patch, lambda **kw: calls.append(("ours", kw["n"])))
        later = knobs.compilation.listener = lambda **kw: calls.append(("later", kw["n"]))
    assert knobs.compilation.listener is later  # someone installed theirs on top: it stays


COMPILE_ONE = '''
import json
import sys

import harness.compile.cache as cache
from harness.compile import warm

latched = []
cache.latch_e5m2 = lambda t: latched.append(t.name)
entry = json.loads(sys.argv[1])
root = sys.argv[2]
before = root in sys.path
out = [warm._compile_one(entry, t, root) for t in ("sm80", "sm80", "sm90")]
out.append(warm._compile_one(dict(entry, module="wk_nowhere", file=""), "sm80", root))
print(json.dumps({"before": before, "after": root in sys.path, "latched": latched,
                  "out": [[o, w] for o, _, w in out], "skipped_seconds": out[-1][1]}))
'''


def test_an_entry_is_compiled_from_its_file_once_latched(recorded, tmp_path):
    """A kernel module that does not import by name (``wkpkg.kmod``, its folder not on ``sys.path``) is found
    from the entry's file, relative to the rootdir; the e5m2 lowering is latched once per target, before the
    target's first compile; the second compile of an entry is read from Triton's cache. In a process of its
    own, as the warm start's pool runs it: this lane's process imported Triton interpreting."""
    root = tmp_path / "root"
    (root / "wkpkg").mkdir(parents=True)
    (root / "wkpkg" / "kmod.py").write_text(KERNEL)
    (tmp_path / "one.py").write_text(COMPILE_ONE)
    _, entries = read_manifest(recorded / "launches.json")
    entry = dict(entries[0], module="wkpkg.kmod", file="wkpkg/kmod.py")
    p = _run([str(tmp_path / "one.py"), json.dumps(entry), str(root)], tmp_path, tmp_path / "cache")
    got = json.loads(p.stdout.splitlines()[-1])
    assert got["out"][:3] == [["compiled", ""], ["cached", ""], ["compiled", ""]]
    assert got["latched"] == ["sm80", "sm90"]
    # the package's parent, one level above the file's folder, was put on sys.path
    assert (got["before"], got["after"]) == (False, True)
    # a module that imports neither by name nor from a file is skipped, naming the import error
    assert got["out"][3] == ["skipped", "ModuleNotFoundError: No module named 'wk_nowhere'"]
    assert got["skipped_seconds"] == 0.0


def test_the_warm_summary_names_every_outcome_it_had():
    from collections import Counter

    from harness.compile.warm import WarmResult

    r = WarmResult("sm90", 4, Counter(compiled=3, cached=2, failed=1), cpu_seconds=7.25, wall_seconds=2.04)
    assert r.summary("m.json", "/c") == ("harness compile --warm: 6 launches from m.json for sm90: 3 compiled, "
                                         "2 already cached, 1 failed; 2.0s wall, 7.2s compiling in 4 processes; "
                                         "Triton cache /c")


# --------------------------------------------------- the warm start beside the run (--background)

def test_background_returns_at_once_and_writes_done_when_it_ends(recorded, tmp_path):
    done = tmp_path / "warm.done"
    done.write_text("an earlier run's")  # never taken for this run's
    cache = tmp_path / "bg"
    p = _run(["-m", "harness", "compile", "--warm", "launches.json", "--jobs", "1", "--background", str(done)],
             recorded, cache)
    assert f"in the background (pid {background.pid_path(done).read_text()}, log {done}.log)" in p.stdout
    assert f"{background.DONE_ENV}={done} waits for it" in p.stdout
    w = background.wait_done(done, timeout=300)
    assert w.outcome == "done", (Path(f"{done}.log").read_text(), w)
    doc = json.loads(done.read_text())
    assert doc["rc"] == 0 and "2 launches from launches.json for sm90: 2 compiled, 0 already cached" in doc["summary"]
    assert doc["summary"] in Path(f"{done}.log").read_text()
    assert _counts(_run(["launch.py", "check"], recorded, cache)) == (0, 2)  # the JIT finds both


def test_done_file_is_written_when_the_warm_start_fails(tmp_path, capsys):
    bad, done = _bad(tmp_path, "{"), tmp_path / "d"
    assert main(["compile", "--warm", str(bad), "--done-file", str(done)]) == 2
    doc = json.loads(done.read_text())
    assert doc["rc"] == 2 and "not a launch manifest" in doc["summary"]
    assert background.wait_done(done, timeout=0).outcome == "failed (exit 2)"
    assert main(["compile", "--warm", str(tmp_path / "none.json"), "--missing-ok", "--done-file", str(done)]) == 0
    assert json.loads(done.read_text()) == {"rc": 0, "summary": capsys.readouterr().out.strip().splitlines()[-1]}


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--warm", "{bad}", "--background", "{d}"], "not a launch manifest"),
        (["--warm", "{none}", "--background", "{d}"], "no such manifest"),
        (["--warm", "{none}", "--background", "{d}", "--done-file", "{d}"], "give one of them"),
        (["--warm", "{none}", "--background", "{dir}", "--missing-ok"], "--background: expected a file path in an "
                                                                        "existing directory"),
        (["--warm", "{none}", "--done-file", "{nodir}/d"], "--done-file: expected a file path in an existing "
                                                            "directory"),
    ],
)
def test_background_usage_errors_exit_2_and_start_nothing(tmp_path, capsys, argv, match):
    names = {"bad": str(_bad(tmp_path, "{")), "none": str(tmp_path / "none.json"), "d": str(tmp_path / "d"),
             "dir": str(tmp_path), "nodir": str(tmp_path / "nodir")}
    stale = "--background" in argv and argv[argv.index("--background") + 1] == "{d}"
    if stale:  # an earlier run's files, which no waiter may take for this one's
        background.write_done(tmp_path / "d", 0, "an earlier run's")
        background.write_pid(tmp_path / "d", os.getpid())
    assert main(["compile", *[a.format(**names) for a in argv]]) == 2
    assert match in capsys.readouterr().err
    assert not background.pid_path(tmp_path / "d").exists() and not (tmp_path / "d").exists()


def test_the_gpu_lane_waits_for_the_background_warm_start_before_its_first_test(pytester, monkeypatch, tmp_path):
    """A GPU faked for the lane choice, in a child process: with HARNESS_WARM_DONE set, the test runs only once
    the background warm start (here: a stand-in process naming the file) has written it, and the summary says
    how long."""
    import threading

    done = tmp_path / "warm.done"
    stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "--done-file", str(done)])
    background.write_pid(done, stand_in.pid)  # alive and naming the file: the child must wait for it
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv(background.DONE_ENV, str(done))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(pytester.path), os.environ.get("PYTHONPATH")])))
    pytester.makepyfile(
        test_first=f"import os\ndef test_first():\n    assert os.path.exists({str(done)!r})\n",
        fakegpu="import torch\ntorch.cuda.is_available = lambda: True\n")
    timer = threading.Timer(3.0, background.write_done, (done, 0, "warm"))
    timer.start()
    try:
        result = pytester.runpytest_subprocess("-p", "fakegpu", "-p", "no:cacheprovider", "--harness-lane=gpu",
                                               "--harness-arch=sm90")
    finally:
        timer.cancel()
        stand_in.kill()
        stand_in.wait()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["harness: 1 process(es) waited up to *s before their first test for the "
                                 "background warm start (done)"])
    monkeypatch.setenv(background.WAIT_ENV, "soon")
    result = pytester.runpytest_subprocess("-p", "fakegpu", "-p", "no:cacheprovider", "--harness-lane=gpu",
                                           "--harness-arch=sm90")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*HARNESS_WARM_WAIT_S='soon': expected the most seconds to wait*"])
