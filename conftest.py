"""Root conftest: this repo's own test wiring. The harness plugin itself arrives via its pytest11 entry point.

``pytester`` drives the plugin's self-tests in throwaway directories.
"""

import os
import sys

import pytest

#: torch modules that register operator libraries when first imported and refuse a second registration: an
#: in-process pytester run drops the modules it imported, so one first imported inside it (torch.testing's first
#: assert_close imports DTensor; a kernel's torch.compile imports dynamo) fails with "Only a single
#: TORCH_LIBRARY can be used to register the namespace ..." when the next test imports it again
_REGISTER_ONCE = ("torch.distributed.tensor", "torch._dynamo")

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True, scope="session")
def _torch_registries_before_pytester() -> None:
    """Import :data:`_REGISTER_ONCE` once per test process, before any test's ``pytester`` takes its module
    snapshot (a session fixture is set up first), so no in-process run drops them (only where the tests have
    imported torch already)."""
    if "torch" not in sys.modules:
        return
    import importlib

    for name in _REGISTER_ONCE:
        try:
            importlib.import_module(name)
        except ImportError:  # a torch build without them registers nothing
            pass


#: What the pytest runs a self-test starts leave out, through ``PYTEST_ADDOPTS`` (which in-process runs, child
#: processes and the pytest that ``python -m harness golden regen`` starts all read):
#: - hypothesis' plugin: no inner test uses hypothesis, and the plugin imports it at the end of every run, ~1 CPU-s
#:   each time (an in-process run drops the modules it imported, so the next one imports them again);
#: - pytest's unraisable-exception plugin: it ends every session with full garbage collections, which over a heap
#:   holding torch took 17 of the lane's CPU-s in child processes (py-spy, 2026-12-07; about 8 s of a 2-core lane).
#:   Python's own hook still prints an unraisable exception to the run's stderr.
SELF_TEST_ADDOPTS = "-p no:hypothesispytest -p no:unraisableexception"


@pytest.fixture(autouse=True)
def _pytester_runs_lean(request: pytest.FixtureRequest) -> None:
    """:data:`SELF_TEST_ADDOPTS` for the pytest runs of a test using ``pytester``; set after pytester's setup,
    which clears ``PYTEST_ADDOPTS``."""
    if "pytester" not in request.fixturenames:
        return
    request.getfixturevalue("pytester")
    monkeypatch = request.getfixturevalue("monkeypatch")
    opts = os.environ.get("PYTEST_ADDOPTS", "")
    monkeypatch.setenv("PYTEST_ADDOPTS", f"{opts} {SELF_TEST_ADDOPTS}".strip())
