"""One pytester run of a capture test's project on the interpreter lane, with the harness's JSON report read back:
the shape five capture test files share. The caller passes every capture option itself (``--harness-compile-
launches`` or its ini form, targets, widening, budget, depth), so each test still shows what it runs with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def run_reported(pytester: Any, tmp_path: Path, *args: str) -> tuple[Any, dict[str, Any]]:
    """``pytester.runpytest`` in process (no hypothesis, cache or xdist plugins, ``--harness-lane=interp``) with
    ``args``; the result and the report's ``compile_launches`` section."""
    report = tmp_path / "report.json"
    result = pytester.runpytest("-p", "no:hypothesispytest", "-p", "no:cacheprovider", "-p", "no:xdist",
                                "--harness-lane=interp", f"--harness-report={report}", *args)
    return result, json.loads(report.read_text())["compile_launches"]
