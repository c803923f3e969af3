"""pytest plugin entry point (``pytest11: harness``); disable with ``-p no:harness``.

Thin on purpose: options, markers, lane set-up, collection-time gating and fixtures. The numerics live in
the library modules; the golden, compile-matrix and xdist GPU-pinning machinery in their own hook modules.

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
from typing import Any

import pytest

from harness import summary, tolerances
from harness.arch import ENV_ARCH, Arch, current_arch, detect_arch, interpreting, parse_arch, set_current_arch

arch_key = pytest.StashKey[Arch]()
lane_key = pytest.StashKey[str]()
collector_key = pytest.StashKey[summary.Collector]()
#: The session's tolerance table (the active one of ``harness.tolerances`` while the session runs).
tolerance_table_key = pytest.StashKey[tolerances.ToleranceTable]()

#: What the tolerance fixture and goldens use when a test has no ``harness_op`` marker: no rows of its own,
#: so the wildcard-op rows (torch.testing's defaults) apply.
DEFAULT_OP = "default"

# Sessions configured in this process and not yet cleaned up: a pytester session inside a test is nested
# and inherits the outer process's modules (and their kernels), which are not its own doing.
_open_sessions = 0

_SUBPLUGINS = ("harness._golden_hooks", "harness._compile_hooks", "harness._launch_hooks", "harness._gpu_hooks")

_MARKERS = (
    "gpu: needs a real GPU (CUDA or ROCm); skipped on the interpreter and on plain CPU",
    "interp_only: runs only on the Triton interpreter lane",
    "lane_independent: runs the same on every lane (no kernel on the device); the GPU lane skips it unless "
    "--harness-lane-independent=run",
    "arch(*names): runs only on these exact arch families (sm86 counts as sm80; sm90 is not sm80)",
    "min_arch(name): runs on this arch or newer of the same kind",
    "dtype_cases(src=None, fmt=None): restrict the dtype_case fixture (e.g. src=['bf16'], fmt=['e4nv'])",
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
        "--harness-interp-casts", dest="harness_interp_casts", choices=("gpu", "off"), default="gpu",
        help="interpreter lane: gpu (default) makes its FP8 casts those of --harness-arch (a CUDA arch; else "
             "sm90), refusing what that compiler refuses; off: the interpreter's own casts",
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
    for name in _SUBPLUGINS:
        if not pluginmanager.has_plugin(name):
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
        import torch

        return "gpu" if torch.cuda.is_available() else "interp"
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
    # Before pytest imports the initial conftest.py files, so rows they register at import time land in this
    # session's table, after (and over) the TOML rows.
    _open_tolerance_table(early_config)


def _open_tolerance_table(config: pytest.Config) -> None:
    """The session's own tolerance table (``harness.tolerances``: base rows + the ini's TOML files), active
    until the session ends, when the table active before (the base table, or an outer session's) is back."""
    try:
        table = tolerances.session_table(config.getini("harness_tolerance_files"), config.rootpath)
    except (OSError, ValueError) as e:
        raise pytest.UsageError(str(e)) from None
    config.stash[tolerance_table_key] = table
    previous = tolerances.set_active_table(table)
    config.add_cleanup(lambda: tolerances.set_active_table(previous))


def pytest_configure(config: pytest.Config) -> None:
    global _open_sessions
    for line in _MARKERS:
        config.addinivalue_line("markers", line)
    nested = _open_sessions > 0
    _open_sessions += 1
    config.add_cleanup(_close_session)
    lane = _choose_lane(config)
    if lane == "interp":
        # Must happen before any kernel module is imported: Triton decides at decoration time. Restored at
        # the end, so a session nested in a test (pytester) leaves the outer session's lane as it was.
        previous_env = os.environ.get("TRITON_INTERPRET")
        os.environ["TRITON_INTERPRET"] = "1"
        config.add_cleanup(lambda: _restore_env("TRITON_INTERPRET", previous_env))
        if not nested:
            _refuse_early_kernels()
    config.stash[lane_key] = lane
    override = config.getoption("harness_arch")
    arch = parse_arch(override) if override else detect_arch()
    if lane == "gpu" and not arch.is_gpu:
        raise pytest.UsageError(
            f"--harness-arch={override}: the gpu lane runs kernels on a GPU, so the assumed arch must be a GPU "
            f"arch (smXY, gfxNNN), not {arch.name}"
        )
    previous_arch = set_current_arch(arch)
    config.add_cleanup(lambda: set_current_arch(previous_arch))
    config.stash[arch_key] = arch
    if lane == "interp":
        from harness import interp_casts

        interp_casts.configure_session(config, arch)

    if tolerance_table_key not in config.stash:  # registered too late for pytest_load_initial_conftests
        _open_tolerance_table(config)           # (a conftest's pytest_plugins): the session's rows start here

    config.stash[collector_key] = summary.activate()
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_XdistReport(config), "harness-xdist-report")


def _close_session() -> None:
    global _open_sessions
    _open_sessions -= 1


def _restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def pytest_unconfigure(config: pytest.Config) -> None:
    if collector_key in config.stash:
        summary.deactivate()
        del config.stash[collector_key]


def pytest_report_header(config: pytest.Config) -> list[str]:
    arch = config.stash.get(arch_key, None)
    if arch is None:
        return []
    forced = " (forced by --harness-arch)" if config.getoption("harness_arch") else ""
    return [f"harness: lane {config.stash[lane_key]}, arch {arch.name} [{arch.kind}]{forced}, "
            f"TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET', '0')}"]


# --- collection-time gating -------------------------------------------------------------------------------

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
        wanted = [parse_arch(a) for a in m.args]
        # Exact family on purpose: a kernel built for sm90a (wgmma) does not run on sm100; ">=" would lie.
        if not any(arch.same_family(w) for w in wanted):
            names = ", ".join(w.family for w in wanted)
            return f"needs {names} family (running on {arch.name})"
    m = item.get_closest_marker("min_arch")
    if m is not None:
        if len(m.args) != 1:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.min_arch takes exactly one arch name")
        need = parse_arch(m.args[0])
        if not arch.at_least(need):
            return f"needs {need.name}+ (running on {arch.name})"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    arch, lane = config.stash[arch_key], config.stash[lane_key]
    for item in items:
        reason = _gate(item, arch, lane)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "dtype_case" not in metafunc.fixturenames:
        return
    from harness.cases import cases

    m = metafunc.definition.get_closest_marker("dtype_cases")
    kwargs = dict(m.kwargs) if m else {}
    if m and m.args:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: dtype_cases takes keywords src= and fmt= only")
    unknown = set(kwargs) - {"src", "fmt"}
    if unknown:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: dtype_cases got unknown {sorted(unknown)}")
    arch = metafunc.config.stash[arch_key]
    params = []
    for case, reason in cases(arch, **kwargs):
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        params.append(pytest.param(case, id=case.id, marks=marks))
    metafunc.parametrize("dtype_case", params)


# --- fixtures ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def harness_arch(pytestconfig: pytest.Config) -> Arch:
    """The arch this session runs (or is told to assume) — what tolerances and gating key on."""
    return pytestconfig.stash[arch_key]


@pytest.fixture(scope="session")
def harness_lane(pytestconfig: pytest.Config) -> str:
    """Where kernels execute: ``"interp"`` (Triton interpreter, CPU tensors) or ``"gpu"``."""
    return pytestconfig.stash[lane_key]


@pytest.fixture(scope="session")
def device(harness_lane: str) -> str:
    """Where kernel tensors live: ``"cuda"`` on the gpu lane (ROCm too), ``"cpu"`` on the interpreter. By
    the lane, not the assumed arch: ``--harness-arch=sm80`` on a CPU box still runs on the CPU."""
    return "cuda" if harness_lane == "gpu" else "cpu"


def _node_seed(nodeid: str, base: int) -> int:
    h = hashlib.sha256(f"{base}:{nodeid}".encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """A seed derived from the test's node id: the same under any ``-n``, any order, any lane."""
    return _node_seed(request.node.nodeid, request.config.getoption("harness_seed"))


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
        from harness.tolerances import lookup

        op = op or self.op or DEFAULT_OP
        dtype = dtype if dtype is not None else self.dtype
        if dtype is None:
            raise LookupError("tolerance(): no dtype; pass dtype=... (the test has no dtype_case)")
        tol = lookup(op, dtype, self.arch, kind=kind)
        return tol.with_(**self.overrides) if self.overrides else tol

    def __repr__(self) -> str:
        return f"ToleranceResolver(op={self.op!r}, dtype={self.dtype!r}, arch={self.arch.name!r})"


def harness_op(node: pytest.Item) -> str | None:
    m = node.get_closest_marker("harness_op")
    if m is None:
        return None
    if len(m.args) != 1 or not isinstance(m.args[0], str):
        raise pytest.UsageError(f"{node.nodeid}: @pytest.mark.harness_op takes one op name")
    return m.args[0]


@pytest.fixture
def tolerance(request: pytest.FixtureRequest, harness_arch: Arch) -> ToleranceResolver:
    """The tolerance row for this test's op (``harness_op`` marker), dtype case and arch."""
    node = request.node
    dtype = None
    callspec = getattr(node, "callspec", None)
    if callspec is not None and "dtype_case" in callspec.params:
        dtype = callspec.params["dtype_case"].id
    m = node.get_closest_marker("tolerance")
    overrides = dict(m.kwargs) if m else {}
    return ToleranceResolver(harness_arch, harness_op(node), dtype, overrides)


# --- observation report -----------------------------------------------------------------------------------

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    summary.set_test(item.nodeid, item)
    try:
        if item.get_closest_marker("unreported"):
            with summary.suspended():
                return (yield)
        return (yield)
    finally:
        summary.set_test("", None)


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    col = config.stash.get(collector_key, None)
    if col is None:
        return
    if hasattr(config, "workerinput"):
        config.workeroutput["harness_report"] = col.to_dicts()
        return
    path = config.getoption("harness_report")
    if path:
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(col.to_json())
        os.replace(tmp, path)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    col = config.stash.get(collector_key, None)
    if col is None or hasattr(config, "workerinput"):
        return
    rows = col.rows()
    if not rows:
        return
    terminalreporter.write_sep("-", "harness: observed error vs tolerance")
    for line in summary.render_table(rows):
        terminalreporter.write_line(line)


class _XdistReport:
    """Controller side of the xdist hand-off: merge each worker's observations as it goes down."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        data = getattr(node, "workeroutput", {}).get("harness_report")
        col = self.config.stash.get(collector_key, None)
        if data and col is not None:
            col.merge(data)


__all__ = ["DEFAULT_OP", "ToleranceResolver", "arch_key", "collector_key", "current_arch", "harness_op", "lane_key",
           "tolerance_table_key"]
