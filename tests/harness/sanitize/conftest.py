"""The sanitizer tests' shared fixture: a sanitizer of the test's own."""

from __future__ import annotations

import pytest

from harness.interp.patch import Patch
from harness.sanitize import State, install


@pytest.fixture
def sanitizer():
    """A sanitizer of the test's own, in fail mode (set ``.mode`` to change it)."""
    with Patch.context() as p:
        st = State("fail")
        assert install(p, st)
        yield st

