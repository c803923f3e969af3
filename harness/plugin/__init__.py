"""pytest plugin entry point (``pytest11: harness``); disable with ``-p no:harness``.

The session-wide glue: options, markers, lane and arch, the one :class:`~harness.session.Session` (pushed at
the start, popped at the end), collection-time gating, the dtype-case and mx-case axes, fixtures, GPU pinning of xdist
workers, the one xdist hand-off and the one ``--harness-report`` writer (:mod:`harness.report`, which
also merges shards' reports). The feature packages' glue (:mod:`harness.golden.plugin`,
:mod:`harness.compile.plugin`, :mod:`harness.interp.plugin`, :mod:`harness.replay.plugin` ...) are plugins of their
own, registered from here; each keeps its state as a section of the session.

Lane and arch are two things. The *lane* (``interp`` or ``gpu``) is where kernels execute: it decides
``TRITON_INTERPRET``, the ``device`` fixture and the ``gpu`` / ``interp_only`` markers. The *arch* (detected,
or assumed with ``--harness-arch``) is what the run is judged as: dtype_case support, the ``arch`` /
``min_arch`` markers and tolerance rows. ``--harness-lane=interp --harness-arch=sm80`` on a CPU box runs the
interpreter (device ``cpu``, interp_only tests run) with sm80's dtype cases and rows.
"""

from __future__ import annotations

import gc
import hashlib
import os
import sys
import time
from typing import Any

import pytest

from harness import gpus, report, summary, tolerances
from harness import session as sessions
from harness.arch import ENV_ARCH, Arch, detect_arch, interpreting, parse_arch
from harness.plugin import timeline
from harness.session import Session
from harness.tolerances import DEFAULT_OP

#: This config's session (pushed in ``pytest_load_initial_conftests``, popped at the config's cleanup).
session_key = pytest.StashKey[Session]()
_nested_key = pytest.StashKey[bool]()


# pluggy calls trylast hooks in registration order: the sanitizer's configure, registered after the interpreter
# shims', runs after theirs, so its hooks go on top of the shims (an access a shim serves itself is checked first).
_SUBPLUGINS = ("harness.golden.plugin", "harness.compile.plugin", "harness.interp.plugin", "harness.vacuity.plugin",
               "harness.coverage.plugin", "harness.replay.plugin", "harness.sanitize.plugin")

_MARKERS = (
    "gpu: needs a real GPU (CUDA or ROCm); skipped on the interpreter and on plain CPU",
    "interp_only: runs only on the Triton interpreter lane",
    "lane_independent: runs the same on every lane (no kernel on the device); the GPU lane skips it unless "
    "--harness-lane-independent=run",
    "arch(*names): runs only on these exact arch families (sm86 counts as sm80; sm90 is not sm80)",
    "min_arch(name): runs on this arch or newer of the same kind",
    "dtype_cases(src=None, fmt=None): restrict the dtype_case fixture (e.g. src=['bf16'], fmt=['e4nv'])",
    "mx_cases(src=None, fmt=None, rule=None): choose the mx_case axis (e.g. fmt=['nvfp4'], rule=['floor', 'rceil'])",
    "harness_op(name): the op whose tolerance row the tolerance fixture and golden checks use",
    "tolerance(**fields): override fields of the resolved tolerance for this test (rtol=, max_ulp=, ...)",
    "unreported: this test's checks stay out of the session report (self-tests whose failures are deliberate)",
)


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    group = parser.getgroup("harness", "low-precision kernel harness")
    group.addoption(
        "--harness-lane", dest="harness_lane", choices=("auto", "interp", "gpu"), default="auto",
        help="auto: the GPU if there is one, else the Triton interpreter (sets TRITON_INTERPRET=1); "
             "interp / gpu: force one",
    )
    group.addoption(
        "--harness-arch", dest="harness_arch", metavar="ARCH", default=os.environ.get(ENV_ARCH) or None,
        help=f"assume this arch (sm90, sm80, interp, gfx942...) for tolerances and gating instead of "
             f"detecting it; for compile-only runs (env {ENV_ARCH})",
    )
    group.addoption(
        "--harness-lane-independent", dest="harness_lane_independent", choices=("auto", "run", "skip"),
        default="auto",
        help="tests marked lane_independent: auto (default) runs them on the interpreter lane and skips them on "
             "the GPU lane, whose time is for what only a GPU can show; run / skip: everywhere",
    )
    group.addoption(
        "--harness-report", dest="harness_report", metavar="PATH", default=None,
        help="write observed error vs tolerance per op × dtype × arch as JSON to PATH",
    )
    group.addoption(
        "--harness-seed", dest="harness_seed", metavar="N", type=int, default=0,
        help="base seed mixed into every test's node-id seed (default 0)",
    )
    parser.addini(
        "harness_tolerance_files", type="linelist", default=[],
        help="globs (relative to rootdir) of TOML files with [[tolerance]] rows",
    )
    # Marked for assertion rewriting together, before the first is imported: harness.compile imports
    # harness.interp.jit, so marking harness.interp only at its own turn warned "already imported" in every run
    todo = [name for name in _SUBPLUGINS if not pluginmanager.has_plugin(name)]
    pluginmanager.rewrite_hook.mark_rewrite(*todo)
    for name in todo:
        pluginmanager.import_plugin(name)


def _assumed_kind(config: pytest.Config) -> str | None:
    """The kind of ``--harness-arch``, if one is given and parses (a bad one is reported where it is used)."""
    assumed = config.getoption("harness_arch")
    try:
        return parse_arch(assumed).kind if assumed else None
    except ValueError:
        return None


def _choose_lane(config: pytest.Config) -> str:
    lane = config.getoption("harness_lane")
    interp_env = interpreting()
    if lane == "auto":
        # an assumed interp/cpu arch can only be judged where kernels are interpreted, GPU present or not
        if interp_env or _assumed_kind(config) in ("interp", "cpu"):
            return "interp"
        return "gpu" if gpus.gpu_present() else "interp"
    if lane == "gpu":
        if interp_env:
            raise pytest.UsageError("--harness-lane=gpu but TRITON_INTERPRET is set; unset it")
        import torch

        if not torch.cuda.is_available():
            raise pytest.UsageError("--harness-lane=gpu but torch sees no GPU")
    return lane


def _early_kernels() -> list[str]:
    """Kernels that exist as GPU ``JITFunction`` objects (outside Triton and torch themselves).

    Triton picks ``JITFunction`` or the interpreter's ``InterpretedFunction`` when ``@triton.jit`` runs, by
    ``TRITON_INTERPRET`` at that moment. A kernel module imported before the plugin set it (from a
    conftest.py, which pytest imports before ``pytest_configure``) keeps GPU kernels, and launching one on a
    machine without a GPU fails deep inside Triton with ``RuntimeError: 0 active drivers``.
    """
    jit = sys.modules.get("triton.runtime.jit")
    cls = getattr(jit, "JITFunction", None)
    if cls is None:
        return []
    found = set()
    for obj in gc.get_objects():
        if issubclass(type(obj), cls):  # type(), not isinstance: some lazy objects warn on __class__
            fn = getattr(obj, "fn", None)
            module = getattr(fn, "__module__", None) or "?"
            if module.split(".")[0] not in ("triton", "torch"):
                found.add(f"{module}.{getattr(fn, '__qualname__', '?')}")
    return sorted(found)


def _refuse_early_kernels() -> None:
    kernels = _early_kernels()
    if not kernels:
        return
    shown = ", ".join(kernels[:5]) + (f" (+{len(kernels) - 5} more)" if len(kernels) > 5 else "")
    raise pytest.UsageError(
        f"harness: Triton kernels were created before the plugin switched to the interpreter lane: {shown}. "
        f"They were decorated while TRITON_INTERPRET was unset (a conftest.py or plugin imported their module "
        f"before pytest_configure), so they are GPU kernels and would fail with 'RuntimeError: 0 active "
        f"drivers'. Import kernel modules from test modules or fixtures, not at the top of a conftest.py, "
        f"or export TRITON_INTERPRET=1 before starting pytest."
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # Before pytest imports the initial conftest.py files: rows they register at import time land in this
    # session's table, after (and over) the TOML rows. An xdist worker also pins its GPU here, before any
    # conftest.py can initialize CUDA.
    _open_session(early_config)
    try:
        early_config.stash[_pin_key] = gpus.pin_worker()
    except (RuntimeError, ValueError) as e:
        raise pytest.UsageError(str(e)) from None


def _hold_extensions() -> None:
    """Import torch and Triton now, in a run that can start pytester sessions in process. Why: such a session
    drops the modules first imported inside it when it ends, and torch's and Triton's compiled extensions crash
    the process when imported a second time (the plugin itself imports them only once a test needs them)."""
    import importlib

    for name in ("torch", "triton"):
        try:
            importlib.import_module(name)
        except ImportError:  # a project without them: nothing to hold
            pass


def pytest_plugin_registered(plugin: Any, plugin_name: str | None, manager: pytest.PytestPluginManager) -> None:
    """pytester registered after configure (a test module's ``pytest_plugins``): hold them too. Before configure
    (the root conftest's) :func:`pytest_configure` does it, once the lane is decided."""
    pytester = plugin_name == "pytester" or getattr(plugin, "__name__", None) == "_pytest.pytester"
    if pytester and sessions.current() is not None and sessions.current().lane is not None:
        _hold_extensions()


def _open_session(config: pytest.Config) -> Session:
    """This config's session: its own tolerance table (base rows + the ini's TOML files) and report, current
    until the config's cleanup, when the enclosing session (a pytester run's outer one) is current again."""
    if session_key in config.stash:
        return config.stash[session_key]
    try:
        table = tolerances.session_table(config.getini("harness_tolerance_files"), config.rootpath)
    except (OSError, ValueError) as e:
        raise pytest.UsageError(str(e)) from None
    s = Session(tolerances=table, observations=summary.Collector(), rootdir=config.rootpath)
    # A session opened inside another (pytester) inherits the outer process's modules (and their kernels),
    # which are not its own doing.
    config.stash[_nested_key] = sessions.current() is not None
    sessions.push(s)
    config.stash[session_key] = s
    config.add_cleanup(lambda: sessions.pop(s))
    return s


def pytest_configure(config: pytest.Config) -> None:
    for line in _MARKERS:
        config.addinivalue_line("markers", line)
    s = _open_session(config)  # registered too late for pytest_load_initial_conftests: the session starts here
    nested = config.stash[_nested_key]
    lane = _choose_lane(config)
    if lane == "interp":
        # Must happen before any kernel module is imported: Triton decides at decoration time. Restored at
        # the end, so a session nested in a test (pytester) leaves the outer session's lane as it was.
        s.patch.setenv("TRITON_INTERPRET", "1", tag="lane")
        if not nested:
            _refuse_early_kernels()
            if "triton.language" in sys.modules:  # imported early (a conftest.py's top): its own @jit helpers
                from harness.interp.jit import interpret_language

                interpret_language(s.patch)
    if not nested and config.pluginmanager.has_plugin("pytester"):
        _hold_extensions()  # after the lane's TRITON_INTERPRET: Triton's own @jit helpers are decorated on import
    override = config.getoption("harness_arch")
    if override is not None and not override.strip():  # "--harness-arch=" detected silently, as if left out
        raise pytest.UsageError(f"--harness-arch={override}: empty; expected an arch name such as sm90, gfx942 or "
                                f"interp (leave the option out to detect the arch)")
    arch = _usage_arch(override, _arch_source(config)) if override is not None else detect_arch()
    if lane == "gpu" and not arch.is_gpu:
        raise pytest.UsageError(
            f"--harness-arch={override}: the gpu lane runs kernels on a GPU, so the assumed arch must be a GPU "
            f"arch (smXY, gfxNNN), not {arch.name}"
        )
    s.arch, s.lane = arch, lane
    _check_report_path(config)
    config.stash[_plan_key] = None
    threads = _worker_threads()  # checked in every process: a bad value stops the run before workers start
    if hasattr(config, "workerinput"):
        _share_cpu_threads(config, threads)
        started = config.workerinput.get(_STARTED)
        if started is not None:  # the controller's clock: this worker's readings count from its session start
            clock = timeline.Worker(config.workerinput["workerid"], started)
            s.add_section(timeline.SECTION, clock)
            config.pluginmanager.register(clock, "harness-timeline")
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        tx = getattr(config.option, "tx", None)
        config.pluginmanager.register(_XdistHandoff(s, bool(tx)), "harness-xdist")
        if tx:  # distributing (-n / --tx): hand the device plan to the workers
            _hand_out_plan(config, lane)


#: torch CPU threads of each xdist worker (a positive int); unset: the cores divided among the workers.
ENV_WORKER_THREADS = "HARNESS_WORKER_THREADS"


def _worker_threads() -> int | None:
    """``HARNESS_WORKER_THREADS`` as a positive int, None when unset; anything else is a usage error naming it."""
    value = os.environ.get(ENV_WORKER_THREADS)
    if value is None:
        return None
    if not (value.isascii() and value.isdigit()) or int(value) < 1:  # isdigit() alone takes '²', int() does not
        raise pytest.UsageError(f"{ENV_WORKER_THREADS}={value!r}: expected a positive int (torch CPU threads per "
                                "xdist worker)")
    return int(value)


def _share_cpu_threads(config: pytest.Config, threads: int | None) -> None:
    """Give an xdist worker's torch CPU ops its share of the cores, not every core each: N workers of
    ``cores`` threads oversubscribe the machine, and CPU-bound tests spin (on the H200 box's GPU lane, 8
    workers on 16 cores, CPU-model tests that take 2 s alone took 20-29 s each; docs/gpu-lane.md). Left to
    torch where ``OMP_NUM_THREADS`` is set; ``threads`` (``HARNESS_WORKER_THREADS``) sets the count.

    Set once torch is imported (:class:`_ThreadShare`), never by importing it: a worker whose tests need no torch
    (a pytester child's, a project's pure-Python tests) would otherwise pay its import, ~1 CPU-s, for nothing."""
    if threads is None:
        if "OMP_NUM_THREADS" in os.environ:
            return
        workers = int(config.workerinput.get("workercount", 1))
        threads = max(1, (os.cpu_count() or 1) // max(1, workers))
    share = _ThreadShare(threads)
    if not share.apply():
        config.pluginmanager.register(share, "harness-thread-share")


class _ThreadShare:
    """Sets torch's thread count at the first of: now, the end of collection, each test's setup, where torch is
    imported by then (a test module's or conftest's import, or an earlier test's)."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.done = False

    def apply(self) -> bool:
        torch = sys.modules.get("torch")
        if not self.done and torch is not None and hasattr(torch, "set_num_threads"):  # not a half-imported torch
            torch.set_num_threads(self.threads)
            self.done = True
        return self.done

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self) -> None:
        self.apply()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self) -> None:
        self.apply()


def session_of(config: pytest.Config) -> Session:
    """The session of ``config`` (the feature plugins' way in)."""
    return config.stash[session_key]


def pytest_report_header(config: pytest.Config) -> list[str]:
    s = config.stash.get(session_key, None)
    if s is None or s.arch is None:
        return []
    forced = " (forced by --harness-arch)" if config.getoption("harness_arch") else ""
    lines = [f"harness: lane {s.lane}, arch {s.arch.name} [{s.arch.kind}]{forced}, "
             f"TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET', '0')}"]
    p = config.stash.get(_plan_key, None)
    if p is not None:
        lines.append(f"harness: xdist workers pinned round-robin to {p.var}={','.join(p.devices)} (from {p.source})")
    return lines


# --- collection-time gating -------------------------------------------------------------------------------

def _arch_source(config: pytest.Config) -> str:
    """Where ``--harness-arch``'s value came from: its default, ``HARNESS_ARCH``, unless it differs from that."""
    value = config.getoption("harness_arch")
    return f"{ENV_ARCH}={value}" if value == os.environ.get(ENV_ARCH) else f"--harness-arch={value}"


def _usage_arch(spec: Any, where: str) -> Arch:
    """``parse_arch(spec)``, a bad name a usage error naming ``where`` it was written."""
    try:
        return parse_arch(spec)
    except (TypeError, ValueError) as e:
        raise pytest.UsageError(f"{where}: {e}") from None


def _gate(item: pytest.Item, arch: Arch, lane: str) -> str | None:
    # the lane decides where a test can execute ...
    if item.get_closest_marker("lane_independent"):
        mode = item.config.getoption("harness_lane_independent")
        if mode == "skip":
            return f"lane-independent (--harness-lane-independent=skip; =run runs it on the {lane} lane)"
        if mode == "auto" and lane == "gpu":
            return (f"lane-independent (covered by the interpreter lane; --harness-lane-independent=run runs it "
                    f"on the {lane} lane)")
    if item.get_closest_marker("gpu") and lane != "gpu":
        return f"needs a GPU (running on the {lane} lane)"
    if item.get_closest_marker("interp_only") and lane != "interp":
        return f"interpreter-only (running on the {lane} lane)"
    # ... the (possibly assumed) arch what it is judged as
    m = item.get_closest_marker("arch")
    if m is not None:
        if not m.args:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.arch needs at least one arch name")
        wanted = [_usage_arch(a, f"{item.nodeid}: @pytest.mark.arch") for a in m.args]
        # Exact family on purpose: a kernel built for sm90a (wgmma) does not run on sm100; ">=" would lie.
        if not any(arch.same_family(w) for w in wanted):
            names = ", ".join(w.family for w in wanted)
            return f"needs {names} family (running on {arch.name})"
    m = item.get_closest_marker("min_arch")
    if m is not None:
        if len(m.args) != 1:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.min_arch takes exactly one arch name")
        need = _usage_arch(m.args[0], f"{item.nodeid}: @pytest.mark.min_arch")
        if not arch.at_least(need):
            return f"needs {need.name}+ (running on {arch.name})"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    s = config.stash[session_key]
    arch, lane = s.arch, s.lane
    for item in items:
        reason = _gate(item, arch, lane)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    node = metafunc.definition
    # Every test carrying one of these markers, whether or not it takes the fixture the marker steers: a
    # misspelt marker on a test that does not (yet) use its fixture was accepted and did nothing.
    _check_case_marker(node, "dtype_cases", ("src", "fmt"))
    _check_case_marker(node, "mx_cases", ("src", "fmt", "rule"))
    harness_op(node)
    tolerance_overrides(node)
    if "mx_case" in metafunc.fixturenames:
        _parametrize_mx(metafunc)
    if "dtype_case" not in metafunc.fixturenames:
        return
    from harness.cases import cases  # here, not at the top: it imports torch

    m = node.get_closest_marker("dtype_cases")
    kwargs = dict(m.kwargs) if m else {}
    arch = metafunc.config.stash[session_key].arch
    try:
        found = cases(arch, **kwargs)
    except ValueError as e:
        raise pytest.UsageError(f"{node.nodeid}: @pytest.mark.{e}") from None
    params = []
    for case, reason in found:
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        params.append(pytest.param(case, id=case.id, marks=marks))
    metafunc.parametrize("dtype_case", params)


def _check_case_marker(node: pytest.Item, name: str, keywords: tuple[str, ...]) -> None:
    """A ``dtype_cases`` / ``mx_cases`` marker's arguments, checked by building the cases they select (a usage
    error naming the test and the marker)."""
    m = node.get_closest_marker(name)
    if m is None:
        return
    allowed = ", ".join(f"{k}=" for k in keywords[:-1]) + f" and {keywords[-1]}="
    if m.args:
        raise pytest.UsageError(f"{node.nodeid}: {name} takes keywords {allowed} only (got positional "
                                f"{m.args!r})")
    unknown = set(m.kwargs) - set(keywords)
    if unknown:
        raise pytest.UsageError(f"{node.nodeid}: {name} got unknown {sorted(unknown)}: {name} takes keywords "
                                f"{allowed} only")
    from harness import cases  # here, not at the top: it imports torch

    try:
        if name == "dtype_cases":
            cases.cases(Arch("interp", "interp"), **m.kwargs)  # what is selected, whatever the arch runs
        else:
            cases.mx_cases(**m.kwargs)
    except ValueError as e:
        raise pytest.UsageError(f"{node.nodeid}: @pytest.mark.{e}") from None


def _parametrize_mx(metafunc: pytest.Metafunc) -> None:
    from harness.cases import mx_cases  # here, not at the top: it imports torch

    m = metafunc.definition.get_closest_marker("mx_cases")
    try:
        params = [pytest.param(c, id=c.id) for c in mx_cases(**(dict(m.kwargs) if m else {}))]
    except ValueError as e:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: @pytest.mark.{e}") from None
    metafunc.parametrize("mx_case", params)


# --- fixtures ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def harness_arch(pytestconfig: pytest.Config) -> Arch:
    """The arch this session runs (or is told to assume) — what tolerances and gating key on."""
    return pytestconfig.stash[session_key].arch


@pytest.fixture(scope="session")
def harness_lane(pytestconfig: pytest.Config) -> str:
    """Where kernels execute: ``"interp"`` (Triton interpreter, CPU tensors) or ``"gpu"``."""
    return pytestconfig.stash[session_key].lane


@pytest.fixture(scope="session")
def device(harness_lane: str) -> str:
    """Where kernel tensors live: ``"cuda"`` on the gpu lane (ROCm too), ``"cpu"`` on the interpreter. By
    the lane, not the assumed arch: ``--harness-arch=sm80`` on a CPU box still runs on the CPU."""
    return "cuda" if harness_lane == "gpu" else "cpu"


def node_seed(nodeid: str, base: int) -> int:
    h = hashlib.sha256(f"{base}:{nodeid}".encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


def seed_id(nodeid: str) -> str:
    """The part of a node id a seed is drawn from: ``tests/<module file>::<test>[<params>]``, whatever folder
    the module sits in. Why: goldens key on the module's file name, not its folder, so moving a test module
    between folders must not change its inputs either (``tests/`` is where every module sat when the goldens
    were captured, so their seeds are what they were)."""
    path, sep, rest = nodeid.partition("::")
    return f"tests/{path.rsplit('/', 1)[-1]}{sep}{rest}"


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """A seed derived from the test's module file name and its name in it (:func:`seed_id`): the same under
    any ``-n``, any order, any lane, and wherever the module is moved."""
    return node_seed(seed_id(request.node.nodeid), request.config.getoption("harness_seed"))


@pytest.fixture
def rng(seed: int) -> Any:
    """A CPU ``torch.Generator`` seeded from ``seed``; draw on CPU then move, so every lane sees one input."""
    import torch

    return torch.Generator(device="cpu").manual_seed(seed)


class ToleranceResolver:
    """Resolves the table row for the running test; callable as ``tolerance(op=None, dtype=None, kind=None)``.

    op: the argument, else the ``harness_op`` marker, else :data:`DEFAULT_OP` (as goldens do), which has no
    rows of its own, so torch.testing's defaults apply. dtype: the argument, else the test's dtype_case id.
    kind: ``"float"`` / ``"codes"`` skips rows of the other kind (see ``harness.tolerances``).
    """

    def __init__(self, arch: Arch, op: str | None, dtype: str | None, overrides: dict[str, Any]) -> None:
        self.arch, self.op, self.dtype, self.overrides = arch, op, dtype, overrides

    def __call__(self, op: str | None = None, dtype: Any = None, kind: str | None = None) -> Any:
        op = op or self.op or DEFAULT_OP
        dtype = dtype if dtype is not None else self.dtype
        if dtype is None:
            raise LookupError("tolerance(): no dtype; pass dtype=... (the test has no dtype_case)")
        tol = tolerances.lookup(op, dtype, self.arch, kind=kind)
        if not self.overrides:
            return tol
        try:
            return tol.with_(**self.overrides)
        except (TypeError, ValueError) as e:  # fields of the other kind of rule (rtol= on a max_ulp row)
            raise type(e)(f"@pytest.mark.tolerance({_kwargs_text(self.overrides)}) does not apply to row "
                          f"{tol.key or tol.origin}: {e}") from None

    def __repr__(self) -> str:
        return f"ToleranceResolver(op={self.op!r}, dtype={self.dtype!r}, arch={self.arch.name!r})"


def _kwargs_text(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


def harness_op(node: pytest.Item) -> str | None:
    """The test's ``harness_op`` marker's op name, None without one; anything but one non-empty name is a usage
    error (an empty name fell back to the default op's rows silently)."""
    m = node.get_closest_marker("harness_op")
    if m is None:
        return None
    if len(m.args) != 1 or m.kwargs or not isinstance(m.args[0], str) or not m.args[0].strip():
        shown = ", ".join([repr(a) for a in m.args] + [f"{k}={v!r}" for k, v in m.kwargs.items()])
        raise pytest.UsageError(f"{node.nodeid}: @pytest.mark.harness_op takes one op name (a non-empty str such "
                                f"as 'fp8_cast'), got harness_op({shown})")
    return m.args[0]


def tolerance_overrides(node: pytest.Item) -> dict[str, Any]:
    """The test's ``tolerance`` marker's field overrides ({} without one). Checked at collection against a rule
    they can apply to: unknown fields, positional values and values no row could take are usage errors naming
    the marker (a positional value was dropped silently; the rest failed later, naming only ``Tolerance``)."""
    m = node.get_closest_marker("tolerance")
    if m is None:
        return {}
    where = f"{node.nodeid}: @pytest.mark.tolerance"
    if m.args:
        raise pytest.UsageError(f"{where} takes fields by keyword (rtol=, atol=, max_ulp=, ulp_floor=, "
                                f"max_mismatch=...), got positional {m.args!r}")
    overrides = dict(m.kwargs)
    probe = dict(overrides)
    if "ulp_floor" in probe and "max_ulp" not in probe:
        probe["max_ulp"] = 0  # a floor overrides a code row's: its max_ulp comes from the row
    try:
        tolerances.Tolerance().with_(**probe)
    except (TypeError, ValueError) as e:
        raise pytest.UsageError(f"{where}: {e}") from None
    return overrides


@pytest.fixture
def tolerance(request: pytest.FixtureRequest, harness_arch: Arch) -> ToleranceResolver:
    """The tolerance row for this test's op (``harness_op`` marker), dtype case and arch."""
    node = request.node
    dtype = None
    callspec = getattr(node, "callspec", None)
    if callspec is not None and "dtype_case" in callspec.params:
        dtype = callspec.params["dtype_case"].id
    elif callspec is not None and "mx_case" in callspec.params:
        dtype = callspec.params["mx_case"].id
    return ToleranceResolver(harness_arch, harness_op(node), dtype, tolerance_overrides(node))


# --- observation report, GPU pins, the xdist hand-off ------------------------------------------------------

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    col = item.config.stash[session_key].observations
    col.set_test(item.nodeid, item)
    try:
        if item.get_closest_marker("unreported"):
            with col.suspended():
                return (yield)
        return (yield)
    finally:
        col.set_test("", None)


@pytest.hookimpl(trylast=True)  # after every feature's own sessionfinish (golden's unused-file judgement)
def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    s = config.stash.get(session_key, None)
    if s is None:
        return
    if hasattr(config, "workerinput"):
        pin = config.stash.get(_pin_key, None)
        if pin is not None:
            s.add_section("gpu_pin", _Pins([f"{pin}{_device_seen()}"]))
        config.workeroutput["harness"] = s.to_worker()
        return
    path = config.getoption("harness_report")
    if path:
        try:
            report.write(path, s.report())  # shards' reports merge with python -m harness report merge
        except OSError as e:  # checked at configure time; what changed since costs the report, never the run
            tr = config.pluginmanager.get_plugin("terminalreporter")
            line = f"harness: --harness-report={path}: not written: {e.strerror or e}"
            if tr is not None:
                tr.write_line(line, red=True)
            else:
                print(line, file=sys.stderr)


def _check_report_path(config: pytest.Config) -> None:
    path = config.getoption("harness_report")
    problem = None if path is None or hasattr(config, "workerinput") else report.check_path(path)
    if problem:
        raise pytest.UsageError(f"--harness-report={path}: {problem}")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    s = config.stash.get(session_key, None)
    if s is None or hasattr(config, "workerinput"):
        return
    rows = s.observations.rows()
    if rows:
        terminalreporter.write_sep("-", "harness: observed error vs tolerance")
        for line in summary.render_table(rows):
            terminalreporter.write_line(line)
    clock = s.sections.get(timeline.SECTION)
    if isinstance(clock, timeline.Controller):
        lines = clock.lines()
        if lines:
            terminalreporter.write_sep("-", "harness: where the wall time went (xdist workers)")
            for line in lines:
                terminalreporter.write_line(line)
    pins = s.sections.get("gpu_pin")
    if pins is not None and pins.lines:
        terminalreporter.write_sep("-", "harness: xdist workers and GPUs")
        for line in sorted(pins.lines, key=lambda t: int(t.split(":")[0][2:])):
            terminalreporter.write_line(line)


#: workerinput key: the controller's session start (time.time()), which workers' timelines count from.
_STARTED = "harness_started"


class _XdistHandoff:
    """Controller side of the one xdist hand-off: fold each worker's session data in as it goes down."""

    def __init__(self, session: Session, distributing: bool) -> None:
        self.session = session
        session.add_section("gpu_pin", _Pins([]))
        self.clock = timeline.Controller() if distributing else None
        if self.clock is not None:
            session.add_section(timeline.SECTION, self.clock)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self) -> None:
        if self.clock is not None:  # before xdist's own sessionstart spawns the workers
            self.clock.started = time.time()

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        if self.clock is not None:
            node.workerinput[_STARTED] = self.clock.started

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        data = getattr(node, "workeroutput", {}).get("harness")
        if data:
            self.session.merge_worker(data)
        if self.clock is not None and not (data and timeline.SECTION in data):
            self.clock.missing += 1  # a worker that crashed or was killed hands over nothing


# --- GPU pinning of xdist workers (the rules are in harness.gpus; docs/gpu-lane.md) ------------------

_pin_key = pytest.StashKey["gpus.Pin | None"]()
_plan_key = pytest.StashKey["gpus.Plan | None"]()


class _Pins:
    """The ``gpu_pin`` section: one "gwK: VAR=value -> device" line per worker, for the terminal summary."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def to_worker(self) -> list[str]:
        return self.lines

    def merge(self, data: list[str]) -> None:
        self.lines.extend(data)

    def report(self) -> None:
        return None


def _plan(interp_lane: bool) -> gpus.Plan | None:
    """The controller's device plan; devices are counted only when the lane may be the GPU one."""
    if gpus.ENV_GPUS not in os.environ and (interp_lane or not gpus.may_have_gpu()):
        return None
    import torch

    hip = getattr(torch.version, "hip", None) is not None
    try:
        return gpus.plan(os.environ, hip=hip, device_count=torch.cuda.device_count)
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: one worker per GPU of the plan (``HARNESS_WORKERS_PER_GPU`` per GPU when set); None (xdist
    counts CPUs) on the interpreter lane.

    Runs before pytest_configure, so the lane is read from the option and the environment the way the
    plugin will choose it; xdist's own override PYTEST_XDIST_AUTO_NUM_WORKERS still wins.
    """
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    lane = config.getoption("harness_lane")
    p = _plan(lane == "interp" or (lane == "auto" and interpreting()))
    try:
        return gpus.auto_workers(p, gpus.workers_per_gpu(os.environ))
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


def _hand_out_plan(config: pytest.Config, lane: str) -> None:
    """Controller of a distributed run: hand the device plan to the workers (spawned after configure)."""
    p = _plan(lane == "interp")
    if p is None:
        return
    config.stash[_plan_key] = p
    config.stash[session_key].patch.setenv(gpus.ENV_PLAN, p.encode(), tag="gpu-plan")


def _device_seen() -> str:
    """What the pinned worker's torch ended up on, when a test initialized CUDA (never initialized here)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return " (CUDA not initialized)"
    props = torch.cuda.get_device_properties(0)
    uuid = getattr(props, "uuid", None)
    return f" -> {torch.cuda.device_count()} visible, device 0 = {props.name}" + (f" (uuid {uuid})" if uuid else "")


__all__ = ["DEFAULT_OP", "ToleranceResolver", "harness_op", "session_key", "session_of"]
