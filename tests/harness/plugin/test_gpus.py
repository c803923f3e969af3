"""harness.gpus: one GPU per xdist worker. The rules as pure functions, then the hand-off through xdist in a
throwaway project (on a CPU box: HARNESS_GPUS names devices, nothing initializes CUDA)."""

import pytest

from harness import gpus
from harness.gpus import ENV_GPUS, ENV_PLAN, Plan

# nothing here touches a device (HARNESS_GPUS names the devices), so the gpu lane leaves it to the
# interpreter lane; the gpu lane's own summary shows its real pins
pytestmark = [pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning"), pytest.mark.lane_independent]

CUDA, HIP, ROCR = "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"


def _no_count():
    raise AssertionError("device_count() must not be called when a list is given")


@pytest.mark.parametrize(
    "value, devices",
    [("0,1", ("0", "1")), (" 2 , 3 ", ("2", "3")), ("", ()), ("  ", ()), ("0,-1,2", ("0",)), ("-1", ()),
     ("GPU-8f3c,MIG-1a2b", ("GPU-8f3c", "MIG-1a2b")), ("7", ("7",))],
)
def test_parse_devices_reads_lists_as_the_driver_does(value, devices):
    assert gpus.parse_devices(value, CUDA) == devices


@pytest.mark.parametrize("value, match", [("0,,1", "has an empty entry"), ("1,0,1", "lists 1 more than once")])
def test_parse_devices_errors_name_the_variable(value, match):
    with pytest.raises(ValueError, match=rf"CUDA_VISIBLE_DEVICES='{value}' {match}"):
        gpus.parse_devices(value, CUDA)


@pytest.mark.parametrize(
    "env, hip, var",
    [({}, False, CUDA), ({HIP: "0", ROCR: "0"}, False, CUDA), ({}, True, HIP), ({ROCR: "1,2"}, True, ROCR),
     ({ROCR: "1,2", HIP: "0"}, True, HIP), ({CUDA: "3"}, True, CUDA), ({CUDA: "3", ROCR: "1"}, True, ROCR)],
)
def test_pin_variable_is_the_innermost_list_of_the_stack(env, hip, var):
    assert gpus.pin_variable(env, hip=hip) == var


@pytest.mark.parametrize("value", ["bogus", "0,gpu1", "GPU", "1.5"])
def test_harness_gpus_entries_that_are_no_device_are_refused(value):
    """HARNESS_GPUS=bogus was planned as a device named 'bogus' (each worker then pinned to nothing)."""
    with pytest.raises(ValueError, match=rf"HARNESS_GPUS='{value}': .* is no device; expected indices"):
        gpus.plan({ENV_GPUS: value}, hip=False, device_count=_no_count)
    for ok in ("0,3", "GPU-8f3c2b1a-aaaa-bbbb-cccc-0123456789ab", "MIG-GPU-8f3c/1/0", "MIG-1a2b3c"):
        assert gpus.plan({ENV_GPUS: ok}, hip=False, device_count=_no_count).devices == tuple(ok.split(","))


def test_plan_order_harness_gpus_then_visible_list_then_device_count():
    assert gpus.plan({ENV_GPUS: "1,3"}, hip=False, device_count=_no_count) == Plan(CUDA, ("1", "3"), ENV_GPUS)
    assert gpus.plan({CUDA: "2,3"}, hip=False, device_count=_no_count) == Plan(CUDA, ("2", "3"), CUDA)
    assert gpus.plan({ENV_GPUS: "3", CUDA: "2,3"}, hip=False, device_count=_no_count).devices == ("3",)
    assert gpus.plan({}, hip=False, device_count=lambda: 4) == Plan(CUDA, ("0", "1", "2", "3"), "device count")
    assert gpus.plan({ROCR: "4,5"}, hip=True, device_count=_no_count) == Plan(ROCR, ("4", "5"), ROCR)
    assert gpus.plan({}, hip=True, device_count=lambda: 2) == Plan(HIP, ("0", "1"), "device count")
    # one GPU (the H200 box): a plan of one device, not "no GPU"
    assert gpus.plan({}, hip=False, device_count=lambda: 1) == Plan(CUDA, ("0",), "device count")


def test_plan_is_none_without_gpus_or_when_switched_off():
    assert gpus.plan({}, hip=False, device_count=lambda: 0) is None
    assert gpus.plan({CUDA: ""}, hip=False, device_count=_no_count) is None  # CUDA hides every device
    assert gpus.plan({ENV_GPUS: "off", CUDA: "0,1"}, hip=False, device_count=_no_count) is None
    assert gpus.plan({ENV_GPUS: " OFF "}, hip=False, device_count=_no_count) is None


@pytest.mark.parametrize(
    "env, match",
    [({ENV_GPUS: ""}, "lists no device; use HARNESS_GPUS=off"),
     ({ENV_GPUS: "0,4", CUDA: "0,1"}, "names 4, which CUDA_VISIBLE_DEVICES='0,1' hides"),
     ({ENV_GPUS: "0,0"}, "HARNESS_GPUS='0,0' lists 0 more than once")],
)
def test_plan_refuses_bad_requests(env, match):
    with pytest.raises(ValueError, match=match):
        gpus.plan(env, hip=False, device_count=_no_count)


def test_auto_workers_is_one_per_gpu():
    assert gpus.auto_workers(None) is None  # xdist counts CPUs
    assert gpus.auto_workers(Plan(CUDA, ("0",), "x")) == 1
    assert gpus.auto_workers(Plan(CUDA, tuple(str(i) for i in range(8)), "x")) == 8


@pytest.mark.parametrize("raw, n", [(None, 1), ("", 1), ("1", 1), ("4", 4), (" 2 ", 2), ("+3", 3)])
def test_workers_per_gpu_reads_a_positive_count(raw, n):
    env = {} if raw is None else {gpus.ENV_PER_GPU: raw}
    assert gpus.workers_per_gpu(env) == n


@pytest.mark.parametrize("raw", ["0", "-1", "x", "1.5", "2x", "00"])
def test_workers_per_gpu_refuses_anything_else_naming_the_variable(raw):
    with pytest.raises(ValueError, match=rf"HARNESS_WORKERS_PER_GPU={raw!r} must be a positive integer"):
        gpus.workers_per_gpu({gpus.ENV_PER_GPU: raw})


def test_auto_workers_multiplies_by_workers_per_gpu():
    assert gpus.auto_workers(None, 4) is None
    assert gpus.auto_workers(Plan(CUDA, ("0",), "x"), 4) == 4
    assert gpus.auto_workers(Plan(CUDA, ("0", "1", "2"), "x"), 2) == 6
    # every device gets the same number: worker K goes to device K mod 3
    three = Plan(CUDA, ("0", "1", "2"), "x")
    seen = [gpus.device_for_worker(f"gw{k}", three) for k in range(gpus.auto_workers(three, 2))]
    assert sorted(seen) == ["0", "0", "1", "1", "2", "2"]
    for bad in (0, -2, 1.0, True, "2"):
        with pytest.raises(ValueError, match="per_gpu must be an int >= 1"):
            gpus.auto_workers(three, bad)


def test_device_for_worker_round_robin_in_the_parents_namespace():
    four = Plan(CUDA, ("0", "1", "2", "3"), "device count")
    assert [gpus.device_for_worker(f"gw{k}", four) for k in range(6)] == ["0", "1", "2", "3", "0", "1"]
    pinned = Plan(CUDA, ("5", "7"), CUDA)  # the parent already sees only 5 and 7
    assert [gpus.device_for_worker(f"gw{k}", pinned) for k in range(3)] == ["5", "7", "5"]
    assert gpus.device_for_worker("gw12", Plan(CUDA, ("GPU-a", "GPU-b", "GPU-c"), "x")) == "GPU-a"
    for bad in ("master", "gw", "gw-1", "gw1x"):
        with pytest.raises(ValueError, match="is not an xdist worker id"):
            gpus.device_for_worker(bad, four)


def test_plan_round_trips_through_the_environment():
    p = Plan(ROCR, ("2", "3"), ROCR)
    assert p.encode() == "ROCR_VISIBLE_DEVICES=2,3"
    assert Plan.decode(p.encode()).devices == ("2", "3")
    for bad in ("2,3", "PATH=1", "=1"):
        with pytest.raises(ValueError, match=f"{ENV_PLAN}="):
            Plan.decode(bad)


def test_pin_worker_sets_the_variable_and_consumes_the_plan(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)  # on the GPU lane this process has CUDA up
    env = {"PYTEST_XDIST_WORKER": "gw1", ENV_PLAN: "CUDA_VISIBLE_DEVICES=4,6", CUDA: "4,6"}
    pin = gpus.pin_worker(env)
    assert (pin.worker, pin.var, pin.value, str(pin)) == ("gw1", CUDA, "6", "gw1: CUDA_VISIBLE_DEVICES=6")
    assert env == {"PYTEST_XDIST_WORKER": "gw1", CUDA: "6"}  # a pytest started by a test plans afresh


@pytest.mark.parametrize("env", [{}, {ENV_PLAN: "CUDA_VISIBLE_DEVICES=0"}, {"PYTEST_XDIST_WORKER": "gw0"}])
def test_pin_worker_does_nothing_outside_a_planned_worker(env):
    before = dict(env)
    assert gpus.pin_worker(env) is None and env == before


def test_pin_worker_refuses_when_cuda_is_already_initialized(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    env = {"PYTEST_XDIST_WORKER": "gw0", ENV_PLAN: "CUDA_VISIBLE_DEVICES=0,1"}
    with pytest.raises(RuntimeError, match="worker gw0: CUDA was initialized before the harness could pin"):
        gpus.pin_worker(env)
    assert CUDA not in env


# --- through xdist --------------------------------------------------------------------------------------

SEEN_CONFTEST = """
import os
# read at conftest import, i.e. before any fixture or test of this worker can touch CUDA
SEEN = {k: os.environ.get(k) for k in ("PYTEST_XDIST_WORKER", "CUDA_VISIBLE_DEVICES", "HARNESS_GPU_PLAN")}
import torch
SEEN["cuda_initialized"] = torch.cuda.is_initialized()
"""

SEEN_TEST = """
import json, pytest
from conftest import SEEN
@pytest.mark.parametrize("i", range(4))
def test_where(i, pytestconfig):
    out = pytestconfig.rootpath / f"seen-{SEEN['PYTEST_XDIST_WORKER']}.json"
    out.write_text(json.dumps(SEEN))
"""


def _seen(pytester):
    import json

    return {p.stem[5:]: json.loads(p.read_text()) for p in pytester.path.glob("seen-*.json")}


def _n_auto(pytester, monkeypatch, devices, per_gpu):
    """An ``-n auto`` run of the seen-project with HARNESS_GPUS=devices (and HARNESS_WORKERS_PER_GPU)."""
    monkeypatch.setenv(ENV_GPUS, devices)
    if per_gpu is None:
        monkeypatch.delenv(gpus.ENV_PER_GPU, raising=False)
    else:
        monkeypatch.setenv(gpus.ENV_PER_GPU, per_gpu)
    monkeypatch.delenv(CUDA, raising=False)
    monkeypatch.delenv(ENV_PLAN, raising=False)
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    pytester.makeconftest(SEEN_CONFTEST)
    pytester.makepyfile(SEEN_TEST)
    result = pytester.runpytest_subprocess("-n", "auto", "-p", "no:randomly")
    result.assert_outcomes(passed=4)
    return result


def test_n_auto_starts_a_worker_per_listed_gpu_pinned_before_its_conftest_runs(pytester, monkeypatch):
    """One run, two facts: ``-n auto`` starts one worker per GPU of HARNESS_GPUS, and each worker sees its own
    device in CUDA_VISIBLE_DEVICES already when its conftest.py is imported (CUDA still uninitialized)."""
    result = _n_auto(pytester, monkeypatch, "5,7", None)
    result.stdout.fnmatch_lines(["*created: 2/2 workers*"])
    seen = _seen(pytester)
    assert set(seen) <= {"gw0", "gw1"} and seen  # a fast worker may run all four
    for worker, s in seen.items():
        assert s["CUDA_VISIBLE_DEVICES"] == {"gw0": "5", "gw1": "7"}[worker], (worker, s)
        assert s["HARNESS_GPU_PLAN"] is None and s["cuda_initialized"] is False, (worker, s)
    result.stdout.fnmatch_lines([
        "harness: xdist workers pinned round-robin to CUDA_VISIBLE_DEVICES=5,7 (from HARNESS_GPUS)",
        "*harness: xdist workers and GPUs*",
        "gw0: CUDA_VISIBLE_DEVICES=5 (CUDA not initialized)",
        "gw1: CUDA_VISIBLE_DEVICES=7 (CUDA not initialized)",
    ])


def test_n_auto_starts_workers_per_gpu_times_the_listed_gpus(pytester, monkeypatch):
    """HARNESS_WORKERS_PER_GPU=2 over one listed GPU: two workers, both on it (one without the variable, as
    above). The round-robin over several GPUs is test_auto_workers_multiplies_by_workers_per_gpu's."""
    result = _n_auto(pytester, monkeypatch, "3", "2")
    result.stdout.fnmatch_lines(["*created: 2/2 workers*"])
    seen = _seen(pytester)
    assert set(seen) <= {"gw0", "gw1"} and seen
    assert {w: s["CUDA_VISIBLE_DEVICES"] for w, s in seen.items()} == dict.fromkeys(seen, "3")


def test_n_auto_on_the_interpreter_lane_leaves_xdist_to_count_cpus(pytester, monkeypatch):
    """No HARNESS_GPUS and the interp lane: no plan, xdist's own count (here its env override) applies."""
    monkeypatch.delenv(ENV_GPUS, raising=False)
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "1")
    pytester.makeconftest(SEEN_CONFTEST)
    pytester.makepyfile(SEEN_TEST)
    result = pytester.runpytest_subprocess("-n", "auto", "--harness-lane=interp", "-p", "no:randomly")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*created: 1/1 worker*"])
    result.stdout.no_fnmatch_line("*xdist workers pinned*")


def test_a_bad_request_is_a_usage_error(pytester, monkeypatch):
    monkeypatch.setenv(ENV_GPUS, "0,0")
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest("-n", "2")  # refused in the controller's configure, before any worker starts
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*HARNESS_GPUS='0,0' lists 0 more than once*"])


def test_a_bad_workers_per_gpu_is_a_usage_error(pytester, monkeypatch):
    monkeypatch.setenv(ENV_GPUS, "0")
    monkeypatch.setenv(gpus.ENV_PER_GPU, "0")
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest("-n", "auto")  # refused while xdist counts workers
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*HARNESS_WORKERS_PER_GPU='0' must be a positive integer*"])


THREADS_TEST = """
import os, torch
def test_threads():
    worker = os.environ.get("PYTEST_XDIST_WORKER", "none")
    with open(f"threads-{worker}-{os.getpid()}.txt", "w") as f:
        f.write(f"{torch.get_num_threads()} {os.cpu_count()}")
"""


@pytest.mark.parametrize("env, want", [(None, "share"), ("3", 3)], ids=["shared", "set"])
def test_xdist_workers_share_the_cores_among_their_torch_threads(env, want, pytester, monkeypatch):
    """Each of 2 workers gets cores // 2 torch threads (at least 1), or HARNESS_WORKER_THREADS."""
    from harness.plugin import ENV_WORKER_THREADS

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    if env is None:
        monkeypatch.delenv(ENV_WORKER_THREADS, raising=False)
    else:
        monkeypatch.setenv(ENV_WORKER_THREADS, env)
    pytester.makepyfile(test_a=THREADS_TEST, test_b=THREADS_TEST)
    result = pytester.runpytest_subprocess("-n", "2", "--harness-lane=interp", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    seen = sorted(pytester.path.glob("threads-gw*.txt"))
    assert len(seen) == 2, [p.name for p in pytester.path.iterdir()]
    for path in seen:
        threads, cores = (int(v) for v in path.read_text().split())
        assert threads == (max(1, cores // 2) if want == "share" else want), path.name


LAZY_TORCH_TEST = """
import os, sys
def test_a_no_torch():
    assert "torch" not in sys.modules  # the plugin shared the cores without importing torch
def test_b_imports_torch_in_its_body():
    import torch
def test_c_threads():
    import torch
    with open(f"threads-{os.environ['PYTEST_XDIST_WORKER']}.txt", "w") as f:
        f.write(f"{torch.get_num_threads()} {os.cpu_count()}")
"""


def test_a_worker_whose_tests_import_no_torch_is_not_made_to(pytester, monkeypatch):
    """The share is set once the worker's tests import torch (here inside a test body: from the next test on),
    never by importing it for them: ~1 CPU-s a worker saved where no test needs torch."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("HARNESS_WORKER_THREADS", raising=False)
    pytester.makepyfile(test_lazy=LAZY_TORCH_TEST)
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadfile", "--harness-lane=interp", "-p",
                                           "no:randomly")
    result.assert_outcomes(passed=3)
    (seen,) = pytester.path.glob("threads-gw*.txt")
    threads, cores = (int(v) for v in seen.read_text().split())
    assert threads == max(1, cores // 2)


@pytest.mark.parametrize("raw", ["0", "-1", "x", "1.5", "²", ""])
def test_worker_threads_take_a_positive_ascii_int_only(monkeypatch, raw):
    """'²'.isdigit() is true and int('²') raises: it ended in an INTERNALERROR instead of naming the variable."""
    from harness.plugin import ENV_WORKER_THREADS, _worker_threads

    monkeypatch.setenv(ENV_WORKER_THREADS, "4")
    assert _worker_threads() == 4
    monkeypatch.setenv(ENV_WORKER_THREADS, raw)
    with pytest.raises(pytest.UsageError, match=rf"^HARNESS_WORKER_THREADS={raw!r}: expected a positive int"):
        _worker_threads()


def test_a_bad_worker_thread_count_is_refused(pytester, monkeypatch):
    monkeypatch.setenv("HARNESS_WORKER_THREADS", "0")
    pytester.makepyfile(test_a=THREADS_TEST)
    result = pytester.runpytest_subprocess("-n", "1", "--harness-lane=interp", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # refused before any worker starts
    out = result.stdout.str() + result.stderr.str()
    assert "HARNESS_WORKER_THREADS='0': expected a positive int" in out, out[-2000:]
