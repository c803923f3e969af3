"""docs/api.md, the public API page, is what scripts/gen_api_doc.py prints from the code: every public name of the
user-facing modules listed, each with its documentation (the script refuses an undocumented one)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.lane_independent

ROOT = Path(__file__).resolve().parents[1]


def test_the_api_page_is_what_the_code_says():
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_api_doc.py")], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    page = (ROOT / "docs" / "api.md").read_text()
    assert p.stdout == page, "docs/api.md is stale: python scripts/gen_api_doc.py > docs/api.md"
    rows = [ln for ln in page.splitlines() if ln.startswith("| `")]
    assert len(rows) > 60 and all(not ln.rstrip().endswith("|  |") for ln in rows)
