"""Differential test: every generated kernel (:mod:`harness.fuzz.kernelgen`) that Triton's plain interpreter runs,
the plugin runs, with the same outputs except where a documented GPU model says otherwise
(:mod:`harness.fuzz.differential` holds the rule; ``python -m harness fuzz`` runs it outside pytest).

CI runs a fixed run of seeds. A longer or other run: ``KERNELGEN_SEED=<first> KERNELGEN_COUNT=<n>``, e.g.
``KERNELGEN_SEED=1000 KERNELGEN_COUNT=5000 TRITON_INTERPRET=1 pytest --harness-lane=interp
tests/harness/interp/test_kernelgen.py -s`` (``-s`` prints the outcomes by op class); ``KERNELGEN_EXAMPLES``
sets the hypothesis examples (0: none). A failure prints the one-seed command that reproduces it.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.fuzz import differential, kernelgen

pytestmark = pytest.mark.interp_only

triton = pytest.importorskip("triton")

SEED = int(os.environ.get("KERNELGEN_SEED", "47000"))
COUNT = int(os.environ.get("KERNELGEN_COUNT", "1500"))
EXAMPLES = int(os.environ.get("KERNELGEN_EXAMPLES", "100"))
CHUNKS = 4  # separate tests, so that xdist spreads a run over its workers
REPRODUCE = (f"KERNELGEN_SEED={{seed}} KERNELGEN_COUNT=1 KERNELGEN_EXAMPLES=0 TRITON_INTERPRET=1 "
             f"pytest --harness-lane=interp {__file__} -s")


def _check_many(seeds: range) -> None:
    outcomes: Counter[tuple[str, str]] = Counter()
    failures = []
    for seed in seeds:
        case = kernelgen.generate(seed)
        v = differential.check(case, reproduce=REPRODUCE)
        outcomes[(case.op_class, v.outcome)] += 1
        if v.problem:
            failures.append(v.problem)
    print(f"\nkernelgen seeds {seeds.start}..{seeds.stop - 1} on Triton {triton.__version__}:")
    for (cls, what), n in sorted(outcomes.items()):
        print(f"  {cls:12} {what:32} {n}")
    assert not failures, f"{len(failures)} of {len(seeds)} generated kernels failed; the first:\n{failures[0]}"


@pytest.mark.skipif(EXAMPLES == 0, reason="KERNELGEN_EXAMPLES=0")
@settings(max_examples=max(EXAMPLES, 1), derandomize=True, database=None,
          deadline=None, suppress_health_check=list(HealthCheck))
@given(rnd=st.randoms(use_true_random=False))
def test_generated_kernels_shrink(rnd):
    """The same check on kernels drawn by hypothesis: a failure shrinks to the smallest kernel the grammar
    writes for it (hypothesis prints it, and ``@reproduce_failure`` to replay it)."""
    case = kernelgen.draw_case(rnd)
    v = differential.check(case, reproduce=REPRODUCE)
    assert v.problem is None, v.problem


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_generated_kernels(chunk):
    step = -(-COUNT // CHUNKS)
    start = SEED + chunk * step
    _check_many(range(start, min(start + step, SEED + COUNT)))


def test_a_seed_loads_as_the_same_kernel_in_every_run(tmp_path):
    """A generated launch's lowering facts are cached on disk under a key of its kernel's module and file: a seed
    loaded again (as the next run loads it) must key alike, or every run compiles each generated kernel anew."""
    from harness.compile.disk_cache import cache_key
    from harness.compile.launches import launch_from_args

    keys = []
    for case in (kernelgen.generate(SEED), kernelgen.generate(SEED)):  # two loads, both alive
        kernel = kernelgen.load_kernel(case, tmp_path)
        launch = launch_from_args(kernel, tuple(case.args()), {**case.constexprs, "num_warps": case.num_warps})
        keys.append((kernel.fn.__module__, cache_key(launch, "sm90")))
    assert keys[0] == keys[1]
