"""Every code example in README.md and docs/*.md runs, and where a page shows output, the output is checked.

A page marks what a fence is with an HTML comment on the line before it (invisible on GitHub and in MkDocs):

- ```` ```python ```` with no mark runs as a script (in this process, in a scratch directory);
- ```` ```pycon ```` runs as a doctest (``...`` matches anything); a page's pycon blocks share one namespace;
- ``<!-- docs-test: file NAME -->`` before a python fence writes it to NAME in the page's scratch project, for a
  later ``run`` block of the same page (a file no run block follows is an error);
- ``<!-- docs-test: run -->`` (or ``run rc=N``) before a ```` ```console ```` fence runs each ``$ command`` in that
  project as a user would (``pytest``/``python`` are this interpreter) and checks its stdout against the lines
  shown under it, ``...`` matching anything, and its exit status;
- ``<!-- docs-test: skip REASON -->`` skips a block with that reason (e.g. one that needs a GPU).

Other fences (``bash``, ``text``, unmarked ``console``) are not examples. The interpreter lane only: the shown
output is what the interpreter lane prints.
"""

from __future__ import annotations

import doctest
import os
import re
import runpy
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = {"python", "pycon", "console"}
_MARK = re.compile(r"^<!--\s*docs-test:\s*(?P<kind>file|run|skip|doctest)\b\s*(?P<arg>.*?)\s*-->\s*$")
_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})(?P<lang>[\w+-]*)\s*$")

# the bad-inputs page fails asserts on purpose: its checks stay out of the session report
pytestmark = [pytest.mark.interp_only, pytest.mark.unreported]


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    mark: str  # "" or "file", "run", "skip", "doctest"
    arg: str
    text: str

    @property
    def where(self) -> str:
        return f"{_rel(self.page)}:{self.line}"


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name


def parse(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, each with the docs-test mark on the line before it (if any)."""
    lines = page.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m["fence"], m["lang"]
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == fence), None)
        if end is None:
            raise ValueError(f"{_rel(page)}:{i + 1}: fence {fence} is never closed")
        mark = _MARK.match(lines[i - 1]) if i else None
        if mark is None and i and lines[i - 1].lstrip().startswith("<!-- docs-test"):
            raise ValueError(f"{_rel(page)}:{i}: unknown docs-test mark {lines[i - 1]!r}; expected "
                             "file NAME, run [rc=N], skip REASON or doctest")
        out.append(Block(page, i + 1, lang, mark["kind"] if mark else "", mark["arg"] if mark else "",
                         "\n".join(lines[i + 1:end]) + "\n"))
        i = end + 1
    return out


def _problems(blocks: list[Block]) -> list[str]:
    """What is wrong with a page's marks: examples that would silently not run, marks on the wrong fence."""
    bad = []
    pending: list[Block] = []
    for b in blocks:
        if b.mark == "file":
            if b.lang != "python" or not re.fullmatch(r"[\w./-]+\.py", b.arg) or ".." in b.arg:
                bad.append(f"{b.where}: 'file NAME' marks a python fence with a relative .py name; got {b.lang} "
                           f"{b.arg!r}")
            pending.append(b)
        elif b.mark == "run":
            if b.lang != "console" or not re.fullmatch(r"(rc=\d+)?", b.arg):
                bad.append(f"{b.where}: 'run [rc=N]' marks a console fence; got {b.lang} {b.arg!r}")
            if not b.text.startswith("$ "):
                bad.append(f"{b.where}: a run block starts with a '$ command' line")
            pending = []
        elif b.mark == "skip" and not b.arg:
            bad.append(f"{b.where}: 'skip' needs a reason")
        elif b.mark == "doctest" and b.lang != "pycon":
            bad.append(f"{b.where}: 'doctest' marks a pycon fence; got {b.lang}")
    bad += [f"{b.where}: file {b.arg} is run by no later 'run' block of its page" for b in pending]
    return bad


def _units() -> list[pytest.param]:
    units = []
    for page in PAGES:
        blocks = parse(page)
        pycon = [b for b in blocks if b.lang == "pycon" and b.mark != "skip"]
        if pycon:
            units.append(pytest.param("doctest", pycon, id=f"{pycon[0].where}-doctest"))
        files: list[Block] = []
        for b in blocks:
            if b.mark == "skip" and b.lang in RUNNABLE:
                units.append(pytest.param("skip", [b], id=b.where))
            elif b.mark == "file":
                files.append(b)
            elif b.mark == "run":
                units.append(pytest.param("run", [*files, b], id=b.where))
            elif b.lang == "python" and not b.mark:
                units.append(pytest.param("python", [b], id=b.where))
    return units


def test_every_example_is_marked_and_runs_somewhere():
    """A python fence runs, is a file a run block uses, or is skipped with a reason; marks sit on the right fence."""
    assert [p for page in PAGES for p in _problems(parse(page))] == []


# --- running them ---------------------------------------------------------------------------------------------

def _env() -> dict[str, str]:
    """The environment a reader's shell would have: no settings of this pytest run (its addopts, the assumed
    arch, shard variables), the checkout importable (the kernels examples use), a fixed terminal width."""
    env = {k: v for k, v in os.environ.items()
           if (not k.startswith(("PYTEST_", "HARNESS_")) or k == "HARNESS_COMPILE_CACHE")
           and k not in ("CI", "BUILD_NUMBER")}  # pytest stops truncating its summary lines on a CI runner
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env["COLUMNS"] = "80"
    env["PY_COLORS"] = "0"
    # hypothesis' plugin prints nothing in these runs and costs ~1 CPU-s each (root conftest.py says why)
    env["PYTEST_ADDOPTS"] = "-p no:hypothesispytest"
    return env


def _commands(block: Block) -> list[tuple[str, str]]:
    """(command, shown output) pairs of a console block."""
    out: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        else:
            out[-1][1].append(line)
    return [(cmd, "\n".join(lines) + "\n") for cmd, lines in out]


def _argv(command: str) -> list[str]:
    argv = shlex.split(command)
    if argv[0] == "pytest":
        return [sys.executable, "-m", "pytest", *argv[1:]]
    if argv[0] == "python":
        return [sys.executable, *argv[1:]]
    raise ValueError(f"a run block runs pytest or python; got {command!r}")


def output_matches(want: str, got: str) -> bool:
    """doctest's rule: ``...`` matches any text, line ends included; trailing spaces do not count."""
    strip = lambda s: "\n".join(ln.rstrip() for ln in s.splitlines()) + "\n"  # noqa: E731
    return doctest.OutputChecker().check_output(strip(want), strip(got), doctest.ELLIPSIS)


def _run(blocks: list[Block], tmp_path: Path) -> None:
    *files, run = blocks
    for f in files:
        (tmp_path / f.arg).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f.arg).write_text(f.text)
    rc_want = int(run.arg.partition("rc=")[2] or 0)
    for command, want in _commands(run):
        done = subprocess.run(_argv(command), cwd=tmp_path, env=_env(), capture_output=True, text=True,
                              timeout=300)
        assert output_matches(want, done.stdout), (
            f"{run.where}: `{command}` printed what the page does not show.\n--- shown ---\n{want}--- printed ---\n"
            f"{done.stdout}--- stderr (last lines) ---\n{chr(10).join(done.stderr.splitlines()[-15:])}")
        assert done.returncode == rc_want, f"{run.where}: `{command}` exited {done.returncode}, the page says {rc_want}"


def _doctest(blocks: list[Block]) -> None:
    parser, globs, report = doctest.DocTestParser(), {"__name__": "__docs__"}, []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for b in blocks:
        test = parser.get_doctest(b.text, globs, b.where, str(b.page), b.line)
        runner.run(test, out=report.append, clear_globs=False)
        globs = test.globs  # a DocTest runs on a copy: the page's next block continues from this one's names
    assert runner.failures == 0, "".join(report)


@pytest.mark.parametrize(("kind", "blocks"), _units())
def test_example(kind: str, blocks: list[Block], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if kind == "skip":
        pytest.skip(f"{blocks[0].where}: {blocks[0].arg}")
    if kind == "run":
        _run(blocks, tmp_path)
    elif kind == "doctest":
        _doctest(blocks)
    else:
        script = tmp_path / "example.py"
        script.write_text(blocks[0].text)
        monkeypatch.chdir(tmp_path)
        runpy.run_path(str(script), run_name="__main__")


# --- the checker itself -------------------------------------------------------------------------------------

def test_output_check_fails_on_a_changed_line_and_matches_ellipsis():
    shown = "....F....   [100%]\n...\n1 failed, 8 passed in ...\n"
    assert output_matches(shown, "....F....   [100%]\nE   an error\nmore\n1 failed, 8 passed in 0.90s\n")
    assert not output_matches(shown, "......... [100%]\n9 passed in 0.90s\n")
    assert not output_matches(shown, "....F....   [100%]\n2 failed, 7 passed in 0.90s\n")


def test_marks_are_checked(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- docs-test: file t.py -->\n```python\nx = 1\n```\n\n<!-- docs-test: skip -->\n```python\n"
                    "y\n```\n<!-- docs-test: runs -->\n```console\n$ pytest\n```\n")
    with pytest.raises(ValueError, match=r"unknown docs-test mark '<!-- docs-test: runs -->'"):
        parse(page)
    page.write_text(page.read_text().replace("runs -->", "run -->"))
    assert _problems(parse(page)) == ["page.md:7: 'skip' needs a reason"]
    page.write_text(page.read_text().replace("<!-- docs-test: run -->\n```console\n$ pytest\n```\n", ""))
    assert _problems(parse(page)) == ["page.md:7: 'skip' needs a reason",
                                      "page.md:2: file t.py is run by no later 'run' block of its page"]
