"""Root conftest: this repo's own test wiring. The harness plugin itself arrives via its pytest11 entry point.

``pytester`` drives the plugin's self-tests in throwaway directories.
"""

import os

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _pytester_runs_without_hypothesis(request: pytest.FixtureRequest) -> None:
    """The pytest runs a self-test starts (in process or as a child) load no hypothesis plugin: no inner test
    uses hypothesis, and its plugin imports hypothesis at the end of every run, ~1 CPU-s each time (an
    in-process run drops the modules it imported, so the next one imports them again). Through
    ``PYTEST_ADDOPTS``, which in-process runs, child processes and the pytest that ``python -m harness golden
    regen`` starts all read; set after pytester's setup, which clears it."""
    if "pytester" not in request.fixturenames:
        return
    request.getfixturevalue("pytester")
    monkeypatch = request.getfixturevalue("monkeypatch")
    opts = os.environ.get("PYTEST_ADDOPTS", "")
    monkeypatch.setenv("PYTEST_ADDOPTS", f"{opts} -p no:hypothesispytest".strip())
