"""The house rules on imports: the logic imports without pytest (only the glue modules load it), and a pytest run
that uses no kernel imports neither torch nor Triton, though the plugin is loaded into it."""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import harness

pytestmark = pytest.mark.lane_independent

ROOT = Path(__file__).resolve().parents[2]


def _is_glue(name: str) -> bool:
    """The pytest glue: the entry plugin package and each feature package's ``plugin`` module."""
    return name == "harness.plugin" or name.startswith("harness.plugin.") or name.endswith(".plugin")


def _modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(harness.__path__, "harness."))


def test_the_glue_is_where_the_rule_says():
    glue = [m for m in _modules() if _is_glue(m)]
    assert glue == ["harness.compile.plugin", "harness.coverage.plugin", "harness.golden.plugin",
                    "harness.interp.plugin", "harness.mutate.plugin", "harness.plugin", "harness.plugin.timeline",
                    "harness.replay.plugin", "harness.sanitize.plugin", "harness.vacuity.plugin"]


_IMPORT_ALL = """
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
    if "pytest" in sys.modules:
        print("pytest loaded by", name)
        break
else:
    print("pytest absent")
"""


def test_every_logic_module_imports_without_pytest():
    logic = [m for m in _modules() if not _is_glue(m) and m != "harness.__main__"]
    assert len(logic) > 40  # the walk found the package, not an empty path
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    p = subprocess.run([sys.executable, "-c", _IMPORT_ALL, *logic, "harness.__main__"], capture_output=True,
                       text=True, env=env, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == "pytest absent", p.stdout


def test_a_run_that_uses_no_kernel_imports_neither_torch_nor_triton(pytester, monkeypatch):
    from harness import gpus

    pytester.makepyfile(test_plain=textwrap.dedent("""
        import sys

        def test_arithmetic(request):
            assert 2 + 2 == 4

        def test_last_nothing_heavy_was_imported():
            heavy = [m for m in ("torch", "triton") if m in sys.modules]
            assert heavy == []
    """))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # as a user's shell: the plugin chooses the lane
    lanes = ["interp"] if gpus.may_have_gpu() else ["auto", "interp"]  # with a GPU, auto asks torch
    for lane in lanes:
        r = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--harness-lane={lane}",
                                          "--harness-compile-launches")
        r.assert_outcomes(passed=2)


# --- harness.imports.after_import ------------------------------------------------------------------------------


@pytest.fixture
def fresh_module(tmp_path, monkeypatch):
    """The name of a top-level module nobody has imported yet (a file in a path entry of this test's own)."""
    name = f"harness_after_import_probe_{os.getpid()}_{len(sys.modules)}"
    (tmp_path / f"{name}.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_after_import_runs_every_waiting_callback_once_after_the_module_ran(fresh_module):
    import importlib

    from harness.imports import after_import
    from harness.interp.patch import Patch

    seen, before = [], list(sys.meta_path)
    with Patch.context() as outer, Patch.context() as inner:
        after_import(outer, fresh_module, lambda: seen.append(("outer", sys.modules[fresh_module].VALUE)), tag="t")
        after_import(inner, fresh_module, lambda: seen.append(("inner", sys.modules[fresh_module].VALUE)), tag="t")
        assert seen == []
        importlib.import_module(fresh_module)
        assert seen == [("outer", 42), ("inner", 42)]
        importlib.reload(sys.modules[fresh_module])
        after_import(inner, fresh_module, lambda: seen.append("already"), tag="t")  # imported: runs now
        assert seen == [("outer", 42), ("inner", 42), "already"]
    assert sys.meta_path == before


def test_after_import_waits_no_longer_than_its_layer(fresh_module):
    import importlib

    from harness.imports import after_import
    from harness.interp.patch import Patch

    seen = []
    with Patch.context() as patch:
        after_import(patch, fresh_module, lambda: seen.append("late"), tag="t")
    importlib.import_module(fresh_module)
    assert seen == []


def test_a_failing_callback_warns_and_the_import_still_succeeds(fresh_module):
    import importlib

    from harness.imports import after_import
    from harness.interp.patch import Patch

    def boom() -> None:
        raise RuntimeError("shim broke")

    with Patch.context() as patch:
        after_import(patch, fresh_module, boom, tag="t")
        with pytest.warns(RuntimeWarning, match=f"once {fresh_module} is imported failed: RuntimeError: shim broke"):
            mod = importlib.import_module(fresh_module)
    assert mod.VALUE == 42
    with pytest.raises(ValueError, match="name a top-level module"):
        after_import(Patch(), "triton.language", lambda: None, tag="t")


def test_a_callback_waits_while_a_harness_module_is_mid_import(fresh_module, monkeypatch):
    """A harness module that imports the module waited for (harness.interp.casts imports triton) must finish its
    own import before the callbacks, which import it, run: they wait for flush()."""
    import importlib

    from harness import imports
    from harness.interp.patch import Patch

    seen = []
    with Patch.context() as patch:
        imports.after_import(patch, fresh_module, lambda: seen.append("ran"), tag="t")
        with monkeypatch.context() as m:
            m.setattr(imports, "_harness_initializing", lambda: True)
            importlib.import_module(fresh_module)
            imports.flush()
            assert seen == []
        imports.flush()
        imports.flush()
        assert seen == ["ran"]


def test_in_process_pytester_sessions_can_import_torch_twice_over(pytester):
    """A project whose tests start pytester sessions in process: each inner session drops the modules first
    imported inside it, and torch's extension crashes the process when imported again (a segfault). The plugin
    holds torch and Triton in such a run from configure on, so the second inner session finds them."""
    pytester.makepyfile(test_outer=textwrap.dedent('''
        pytest_plugins = ["pytester"]  # registered at collection, after the plugin configured

        INNER = "import torch\\ndef test_inner():\\n    assert torch.ones(2).sum() == 2\\n"

        def test_twice(pytester):
            pytester.makepyfile(test_inner=INNER)
            for _ in range(2):
                pytester.runpytest("-p", "no:cacheprovider", "--harness-lane=interp").assert_outcomes(passed=1)
    '''))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--harness-lane=interp")
    assert r.ret == 0, "\n".join(r.outlines[-20:] + r.errlines[-20:])
    r.assert_outcomes(passed=1)
