"""The golden workflow's decision, as a table: every (mode, file state, same arch) and what a check does.

The table is written out by hand from the rules in docs/goldens.md; test_golden_lifecycle.py runs
the same combinations end to end through pytest. Invalid combinations (a missing file naming an arch, a
readable one naming none) are refused.
"""

from __future__ import annotations

import itertools

import pytest

from harness.golden.decide import FILE_STATES, MODES, OUTCOMES, Decision, decide

pytestmark = pytest.mark.lane_independent  # the same on every lane: the GPU lane skips it

_ = None  # an invalid combination

# (mode, state) -> {same_arch: (compare, if_equal, if_differs)}
TABLE = {
    ("check", "missing"): {None: ("none", "fail-missing", "fail-missing"), True: _, False: _},
    ("check", "unreadable"): {None: ("none", "fail-unreadable", "fail-unreadable"),
                              True: ("none", "fail-unreadable", "fail-unreadable"),
                              False: ("none", "fail-unreadable", "fail-unreadable")},
    ("check", "readable"): {None: _, True: ("tolerance", "pass", "fail-mismatch"),
                            False: ("tolerance", "pass", "fail-mismatch")},
    ("check", "refused"): {None: ("none", "fail-refused", "fail-refused"), True: _, False: _},

    ("regen", "missing"): {None: ("none", "write-review", "write-review"), True: _, False: _},
    ("regen", "unreadable"): {None: ("none", "write-review", "write-review"),
                              True: ("none", "write-review", "write-review"),
                              False: ("none", "fail-foreign", "fail-foreign")},
    ("regen", "readable"): {None: _, True: ("tolerance", "pass", "write-review"),
                            False: ("tolerance", "pass", "fail-foreign")},
    ("regen", "refused"): {None: ("none", "fail-refused", "fail-refused"), True: _, False: _},

    ("regen-all", "missing"): {None: ("none", "write", "write"), True: _, False: _},
    ("regen-all", "unreadable"): {None: ("none", "write", "write"), True: ("none", "write", "write"),
                                  False: ("none", "fail-foreign", "fail-foreign")},
    ("regen-all", "readable"): {None: _, True: ("content", "pass", "write"),
                                False: ("tolerance", "pass", "fail-foreign")},
    ("regen-all", "refused"): {None: ("none", "fail-refused", "fail-refused"), True: _, False: _},
}

COMBOS = list(itertools.product(MODES, FILE_STATES, (None, True, False)))


def test_the_table_covers_every_combination():
    assert {(m, s, a) for (m, s), row in TABLE.items() for a in row} == set(COMBOS)
    assert len(COMBOS) == 36


@pytest.mark.parametrize("mode, state, same", COMBOS, ids=[f"{m}-{s}-{a}" for m, s, a in COMBOS])
def test_decision(mode, state, same):
    expected = TABLE[mode, state][same]
    if expected is None:
        with pytest.raises(ValueError, match=f"decide: a {state} (file|golden) names"):
            decide(mode, state, same)
        return
    d = decide(mode, state, same)
    assert d == Decision(*expected)
    assert d.compare in ("none", "tolerance", "content")
    assert {d.if_equal, d.if_differs} <= set(OUTCOMES)


def test_no_run_writes_a_golden_of_another_arch():
    """The invariant behind the table: with same_arch False nothing is ever written, whatever happens."""
    for mode, state in itertools.product(MODES, ("unreadable", "readable")):
        d = decide(mode, state, False)
        assert not {d.if_equal, d.if_differs} & {"write", "write-review"}, (mode, state)


def test_check_mode_never_writes():
    for state, same in itertools.product(FILE_STATES, (None, True, False)):
        if TABLE["check", state][same] is not None:
            d = decide("check", state, same)
            assert not {d.if_equal, d.if_differs} & {"write", "write-review"}, (state, same)


@pytest.mark.parametrize("args, match", [
    (("regen_all", "missing", None), "decide: mode must be one of"),
    (("check", "absent", None), "decide: state must be one of"),
    (("check", "readable", 1), "decide: same_arch must be True, False or None"),
    (("check", "readable", "sm90"), "decide: same_arch must be True, False or None"),
])
def test_bad_arguments_are_named(args, match):
    with pytest.raises(ValueError, match=match):
        decide(*args)


@pytest.mark.parametrize("ci", ["true", "1", "yes", "github-actions"])
def test_ci_refuses_writing_goldens_but_not_checking_them(ci):
    from harness.golden.decide import ci_value, run_mode

    env = {"CI": ci}
    assert ci_value(env) == ci and run_mode(False, False, env) == "check"
    for regen, regen_all, flag in ((True, False, "--golden-regen"), (False, True, "--golden-regen-all")):
        with pytest.raises(ValueError, match=rf"^{flag}: refusing to write golden files because the environment "
                                             rf"variable CI is set \(CI='{ci}'\)"):
            run_mode(regen, regen_all, env)


@pytest.mark.parametrize("ci", ["", "0", "false", "No", " off "])
def test_an_explicitly_false_ci_writes_goldens(ci):
    from harness.golden.decide import ci_value, run_mode

    env = {"CI": ci}
    assert ci_value(env) is None and ci_value({}) is None
    assert (run_mode(True, False, env), run_mode(False, True, env), run_mode(True, True, env)) == (
        "regen", "regen-all", "regen-all")
