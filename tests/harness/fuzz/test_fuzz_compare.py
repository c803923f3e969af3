"""``harness.fuzz.gpu``: a capture and its comparison, with the interpreter standing in for the GPU on both sides
(this box has none): a capture made under the plugin's shims must compare bit-exact with the plugin and not with
Triton's own interpreter, and one made under Triton's own the other way round. So each side of the comparison is
seen to count what it claims. The command line's refusals are checked here too."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.__main__ import main
from harness.fuzz import differential, gpu, kernelgen

pytestmark = pytest.mark.interp_only

triton = pytest.importorskip("triton")

#: Seeds whose kernels the models change (bf16 rounding, FP8 casts, a dot, fma contraction), and some they don't.
SEEDS = range(47000, 47024)


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    with differential.quiet():
        plugin = gpu.capture(SEEDS, root / "plugin", device="cpu")
        with differential.plain_interpreter():
            plain = gpu.capture(SEEDS, root / "plain", device="cpu")
    return plugin, plain


def _total(tally: gpu.Tally, key: str) -> int:
    return sum(getattr(r, key) for r in tally.rows.values())


def test_capture_of_the_plugin_compares_exact_with_the_plugin(captures):
    plugin_dir, _ = captures
    t = gpu.compare(plugin_dir)
    ran = _total(t, "cases")
    assert ran == len(SEEDS) - sum(t.gpu_refused.values()) > 0
    assert _total(t, "plugin_exact") == ran
    assert _total(t, "plugin_raised") == 0
    # the models change some of these kernels: Triton's own interpreter is not the plugin
    assert _total(t, "plain_exact") < ran
    assert all(r.smallest is None for r in t.rows.values())


def test_capture_of_the_plain_interpreter_shows_what_the_models_change(captures):
    plugin_dir, plain_dir = captures
    t = gpu.compare(plain_dir)
    ran = _total(t, "cases")
    assert _total(t, "plain_exact") == ran
    # exact equality is symmetric: the cases the plugin matches bit for bit are the same either way round
    assert _total(t, "plugin_exact") == _total(gpu.compare(plugin_dir), "plain_exact") < ran
    for cls, row in t.rows.items():
        differing = row.cases - row.plugin_exact - row.plugin_nan_payload
        assert (row.smallest is not None) == (differing > 0), cls
        if row.smallest is not None:
            lines, seed, text = row.smallest
            case = kernelgen.generate(seed)
            assert case.op_class == cls and lines == case.source.count("\n")
            assert "GPU vs plugin:" in text and case.source in text
    table = t.table()
    assert table.splitlines()[0].startswith(f"{len(SEEDS)} generated kernels (seeds {SEEDS[0]}..{SEEDS[-1]})")
    assert f"| **all** | {ran} | " in table
    assert "## " in t.smallest()


def test_compare_refuses_a_capture_of_another_grammar(captures, tmp_path):
    plugin_dir, _ = captures
    bad = tmp_path / "bad"
    bad.mkdir()
    meta = json.loads((plugin_dir / "meta.json").read_text())
    meta["seeds"] = [SEEDS[0]]
    (bad / "meta.json").write_text(json.dumps(meta))
    with np.load(plugin_dir / f"{SEEDS[0]}.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["source"] = np.array(str(arrays["source"]).replace("def kernel(", "def kernel_renamed("))
    np.savez(bad / f"{SEEDS[0]}.npz", **arrays)
    with pytest.raises(ValueError, match=f"seed {SEEDS[0]}: the captured kernel is not the one"):
        gpu.compare(bad)


def test_capture_never_overwrites(captures):
    plugin_dir, _ = captures
    before = (plugin_dir / "meta.json").read_text()
    with pytest.raises(FileExistsError, match="already holds a capture"):
        gpu.capture(SEEDS, plugin_dir, device="cpu")
    assert (plugin_dir / "meta.json").read_text() == before


def test_capture_on_cuda_refused_while_interpreting(tmp_path):
    with pytest.raises(ValueError, match="TRITON_INTERPRET is set"):
        gpu.capture(SEEDS, tmp_path / "x", device="cuda")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(("what", "make", "message"), [
    ("no directory", lambda d: d / "missing", "is not a directory"),
    ("no meta", lambda d: d, "has no meta.json"),
    ("not json", lambda d: (d / "meta.json").write_text("{") and d, "meta.json is not JSON"),
    ("other format", lambda d: (d / "meta.json").write_text('{"format": 99, "seeds": [1]}') and d,
     "is not format 1"),
])
def test_load_capture_names_what_is_wrong(tmp_path, what, make, message):
    with pytest.raises((OSError, ValueError), match=message):
        gpu.load_capture(make(tmp_path))


@pytest.mark.parametrize(("argv", "message"), [
    (["--count", "0"], "--count: expected at least 1 kernel, got 0"),
    (["--count", "many"], "--count: expected a whole number of kernels, got 'many'"),
    (["--seed", "-3"], "--seed: expected a seed >= 0, got -3"),
    (["--out", "x"], "--out goes with --gpu"),
    (["--arch", "sm91"], "--arch:"),
    (["--gpu", "--compare", "x"], "not allowed with argument"),
    # said "plugin as gfx942" while computing sm90's casts: only CUDA arches are modelled
    (["--arch", "gfx942"], "--arch: gfx942 is not modelled; the plugin imitates a CUDA arch's casts: sm30, "),
    (["--arch", "cpu"], "--arch: cpu is not modelled"),
    (["--arch", "interp"], "--arch: interp is not modelled"),
    # was ignored outside --compare
    (["--markdown", "t.md"], "--markdown goes with --compare or --gpu"),
    (["--compare", "x", "--markdown", "."], "--markdown .: is a directory"),
])
def test_cli_refuses_bad_arguments(capsys, argv, message):
    assert main(["fuzz", *argv]) == 2
    assert message in capsys.readouterr().err


def test_cli_compare_of_a_missing_capture(capsys, tmp_path):
    assert main(["fuzz", "--compare", str(tmp_path / "none")]) == 2
    assert "--compare: compare: capture" in capsys.readouterr().err
