"""Every golden file state under every mode, end to end through pytest: the table of test_golden_decide.py
as a user meets it (outcome, what happens to the file, what the message tells them to do).

One throwaway project holds one parametrized test per file state; each mode is one pytest run over all of
them. Expectations are written out by hand.
"""

from __future__ import annotations

import io
import json
import os
import re
import zipfile

import numpy as np
import pytest

# Imported here, before any in-process pytester run: pytester drops the modules first imported during a run,
# and torch cannot be imported a second time in one process (SystemError, then a segfault). Without this an
# xdist worker whose first test is one of these crashes.
import torch  # noqa: F401

pytest_plugins = ["pytester"]
pytestmark = [
    pytest.mark.lane_independent,
    pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning"),
    pytest.mark.skipif(os.name == "nt", reason="POSIX symlinks"),
]

INI = """
[pytest]
testpaths = tests
addopts = -p no:cacheprovider -p no:hypothesispytest -p harness.golden.plugin --harness-lane=interp
"""

SCENARIOS = ["missing", "corrupt", "malformed_same", "malformed_other", "same_equal", "same_differs",
             "other_equal", "other_differs", "refused_dir", "refused_link"]

SOURCE = f'''
import os

import pytest
import torch


@pytest.mark.parametrize("scenario", {SCENARIOS!r})
def test_g(golden, scenario):
    x = torch.linspace(-3, 3, 8, dtype=torch.float32)
    if os.environ.get("GOLDEN_PHASE") == "run" and scenario.endswith("differs"):
        x = x + 1.0  # far beyond any tolerance row, on this arch or another
    golden.check("out", x)
'''

K, W, A = "kept", "written", "absent"  # what happens to the file
P, F = "PASSED", "FAILED"
TO_REWRITE = "To rewrite it: python -m harness golden regen 'tests/test_life.py::test_g[{s}]'"
FOREIGN = "To update it, run on sm90:"
NOT_REWRITTEN = "Not rewritten: golden/test_life/test_g/{s}/out.npz was captured on sm90 and this run is interp"
RECAPTURE = "rm golden/test_life/test_g/{s}/out.npz && python -m harness golden regen 'tests/test_life.py::test_g[{s}]'"

# scenario -> mode -> (outcome, file, message fragments)
EXPECTED: dict[str, dict[str, tuple[str, str, tuple[str, ...]]]] = {
    "missing": {
        "check": (F, A, ("golden 'out' not found: golden/test_life/test_g/missing/out.npz", "Create it with:")),
        "regen": (F, W, ("regenerated: golden/test_life/test_g/missing/out.npz (new, 8 elements; was missing)",)),
        "regen-all": (P, W, ()),
    },
    "corrupt": {
        "check": (F, K, ("is truncated or corrupt", TO_REWRITE)),
        "regen": (F, W, ("was unreadable (golden file", "is truncated or corrupt")),
        "regen-all": (P, W, ()),
    },
    "malformed_same": {
        "check": (F, K, ("metadata field 'shape' is 5 (int), expected a list of non-negative integers", TO_REWRITE)),
        "regen": (F, W, ("was unreadable (golden file", "metadata field 'shape'")),
        "regen-all": (P, W, ()),
    },
    "malformed_other": {
        "check": (F, K, ("metadata field 'shape'", FOREIGN, RECAPTURE)),
        "regen": (F, K, ("metadata field 'shape'", NOT_REWRITTEN, RECAPTURE)),
        "regen-all": (F, K, ("metadata field 'shape'", NOT_REWRITTEN, RECAPTURE)),
    },
    "same_equal": {"check": (P, K, ()), "regen": (P, K, ()), "regen-all": (P, K, ())},
    "same_differs": {
        "check": (F, K, ("golden 'out' does not match", "(same arch: bit-exact)",
                         "To update it: python -m harness golden regen 'tests/test_life.py::test_g[{s}]'  "
                         "(or pytest --golden-regen)")),
        "regen": (F, W, ("regenerated: golden/test_life/test_g/same_differs/out.npz (8 / 8 elements changed",
                         "previous comparison:")),
        "regen-all": (P, W, ()),
    },
    "other_equal": {"check": (P, K, ()), "regen": (P, K, ()), "regen-all": (P, K, ())},
    "other_differs": {
        "check": (F, K, ("golden 'out' does not match", "(cross-arch (sm90 -> interp))", FOREIGN, RECAPTURE)),
        "regen": (F, K, ("(cross-arch (sm90 -> interp))", NOT_REWRITTEN, RECAPTURE)),
        "regen-all": (F, K, ("(cross-arch (sm90 -> interp))", NOT_REWRITTEN, RECAPTURE)),
    },
    "refused_dir": {m: (F, K, ("test_g/refused_dir/out.npz is a directory, not a golden file: remove it",))
                    for m in ("check", "regen", "regen-all")},
    "refused_link": {m: (F, K, ("test_g/refused_link/out.npz is a symlink (->", "replace the link"))
                     for m in ("check", "regen", "regen-all")},
}
FLAGS = {"check": (), "regen": ("--golden-regen",), "regen-all": ("--golden-regen-all",)}


@pytest.fixture(autouse=True)
def _outside_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)


def _path(root, s: str):
    return root / "golden" / "test_life" / "test_g" / s / "out.npz"


def _malformed(data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, "w") as zout:
        for name in zin.namelist():
            payload = zin.read(name)
            if name == "meta.npy":
                meta = json.loads(np.lib.format.read_array(io.BytesIO(payload)).tobytes())
                meta["shape"] = 5
                buf = io.BytesIO()
                np.lib.format.write_array(buf, np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
                payload = buf.getvalue()
            zout.writestr(name, payload)
    return out.getvalue()


def _run(pytester, *args: str, phase: str) -> pytest.RunResult:
    os.environ["GOLDEN_PHASE"] = phase
    try:
        return pytester.runpytest("-rA", *args)
    finally:
        del os.environ["GOLDEN_PHASE"]


def _captured(pytester) -> dict[str, bytes]:
    """Good goldens of this arch (interp) and of another (sm90), captured by the plugin itself."""
    pytester.makeini(INI)
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_life.py").write_text(SOURCE)
    _run(pytester, "--golden-regen-all", "-k", "same_equal", phase="capture").assert_outcomes(passed=1)
    _run(pytester, "--golden-regen-all", "--harness-arch=sm90", "-k", "other_equal",
         phase="capture").assert_outcomes(passed=1)
    return {"interp": _path(pytester.path, "same_equal").read_bytes(),
            "sm90": _path(pytester.path, "other_equal").read_bytes()}


def _lay_out(root, good: dict[str, bytes]) -> dict[str, bytes | None]:
    """Put every scenario's file in place; returns the bytes each file starts with."""
    import shutil

    shutil.rmtree(root / "golden", ignore_errors=True)
    (root / "outside.npz").write_bytes(good["interp"])
    start: dict[str, bytes | None] = {}
    for s in SCENARIOS:
        p = _path(root, s)
        p.parent.mkdir(parents=True)
        data = {"corrupt": good["interp"][:50], "malformed_same": _malformed(good["interp"]),
                "malformed_other": _malformed(good["sm90"]), "same_equal": good["interp"],
                "same_differs": good["interp"], "other_equal": good["sm90"], "other_differs": good["sm90"]}.get(s)
        if data is not None:
            p.write_bytes(data)
        elif s == "refused_dir":
            p.mkdir()
        elif s == "refused_link":
            p.symlink_to(root / "outside.npz")
        start[s] = data
    return start


def _file_after(root, s: str, start: bytes | None) -> str:
    p = _path(root, s)
    if p.is_symlink() or p.is_dir():
        return K
    if not p.exists():
        return A
    data = p.read_bytes()
    if data == start:
        return K
    from harness.golden.files import read_golden

    _, meta = read_golden(p)
    assert meta["arch"] == "interp", (s, meta["arch"])
    return W


def _sections(result: pytest.RunResult) -> dict[str, str]:
    """The failure text of each scenario (pytest's '____ test_g[x] ____' sections)."""
    out: dict[str, list[str]] = {}
    cur = None
    for line in result.outlines:
        m = re.fullmatch(r"_{3,} test_g\[(\w+)\] _{3,}", line)
        if m:
            cur = m.group(1)
            out[cur] = []
        elif re.match(r"={3,} ", line):
            cur = None
        elif cur is not None:
            out[cur].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


@pytest.mark.parametrize("mode", ["check", "regen", "regen-all"])
def test_every_file_state(pytester, mode):
    good = _captured(pytester)
    start = _lay_out(pytester.path, good)
    outside = (pytester.path / "outside.npz").read_bytes()

    r = _run(pytester, *FLAGS[mode], phase="run")
    outcomes = {m.group(2): m.group(1) for line in r.outlines
                if (m := re.match(r"(PASSED|FAILED) tests/test_life.py::test_g\[(\w+)\]", line))}
    sections = _sections(r)
    got, want = {}, {}
    for s in SCENARIOS:
        outcome, file, fragments = EXPECTED[s][mode]
        want[s] = (outcome, file)
        got[s] = (outcomes.get(s), _file_after(pytester.path, s, start[s]))
        for frag in fragments:
            assert frag.format(s=s) in sections.get(s, ""), (s, frag, sections.get(s, "<no failure section>"))
        if outcome == P:
            assert s not in sections
    assert got == want
    assert (pytester.path / "outside.npz").read_bytes() == outside, "a symlink target was written"

    if mode != "check":  # what a regen run wrote passes the next plain run
        written = [s for s in SCENARIOS if want[s][1] == W]
        r = _run(pytester, "-k", " or ".join(written), phase="run")
        r.assert_outcomes(passed=len(written))
