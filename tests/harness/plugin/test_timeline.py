"""The wall-time section of a distributed run (harness.plugin.timeline): each xdist worker's start-up, tests
and wait, read from the workers' own clocks."""

import re

import pytest

from harness.plugin.timeline import WorkerTimes, render

pytestmark = [pytest.mark.lane_independent, pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")]

HEADER = "*harness: where the wall time went (xdist workers)*"


def test_render_layout_is_pinned():
    """Workers in worker-number order (gw10 after gw2), one that ran no test, and one that handed over nothing."""
    workers = [
        WorkerTimes("gw10", ready=3.0, tests=1, busy=4.0, first=3.5, last=9.0),
        WorkerTimes("gw2", ready=2.0, tests=5, busy=7.5, first=2.5, last=10.0),
        WorkerTimes("gw0", ready=4.0, tests=0, busy=0.0, first=None, last=None),
    ]
    assert render(workers, missing=1) == [
        "3 workers; the last test ended 10.0 s after the session started; tests kept the workers busy 38% of "
        "3 × 10.0 s",
        "start-up (spawn, imports, collection): 2.0-4.0 s (median 3.0)",
        "tests: 6 ran, 11.5 s summed (3.8 s a worker)",
        "idle after its last test, waiting for the slowest worker: 0.0-1.0 s (median 0.5)",
        "gw0: ready 4.0 s, 0 tests, busy 0.0 s, no test",
        "gw2: ready 2.0 s, 5 tests, busy 7.5 s, tests 2.5-10.0 s",
        "gw10: ready 3.0 s, 1 test, busy 4.0 s, tests 3.5-9.0 s",
        "1 worker(s) handed over no timeline",
    ]


def test_render_without_readings():
    assert render([]) == []
    assert render([], missing=2) == ["2 worker(s) handed over no timeline"]


SLEEPS = """
import time, pytest
@pytest.mark.parametrize("i", range(6))
def test_s(i):
    time.sleep(0.2 if i < 5 else 0.6)
"""


def test_workers_report_their_start_up_tests_and_wait(pytester):
    """The workers' tests slept 1.6 s in all: the summed busy time is at least that, all six tests are counted,
    and each worker has its line, ready after the session started and running tests no earlier than that."""
    pytester.makepyfile(SLEEPS)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:randomly", "--harness-lane=interp")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines([HEADER, "2 workers; the last test ended *", "start-up *", "tests: 6 ran, *",
                                 "idle after its last test*"])
    line = next(x for x in result.outlines if x.startswith("tests: "))
    assert 1.6 <= float(re.match(r"tests: 6 ran, ([\d.]+) s summed", line).group(1)) < 20
    worker_line = re.compile(r"(gw\d): ready ([\d.]+) s, (\d+) tests?, busy [\d.]+ s, "
                             r"(no test|tests ([\d.]+)-([\d.]+) s)")
    workers = [m for x in result.outlines if (m := worker_line.match(x))]
    assert sorted(m.group(1) for m in workers) == ["gw0", "gw1"], result.outlines
    assert sum(int(m.group(3)) for m in workers) == 6
    for m in workers:
        ready = float(m.group(2))
        assert 0 < ready < 120  # seconds after the session started, not a time of day
        if m.group(5) is not None:
            assert ready <= float(m.group(5)) <= float(m.group(6))


def test_a_single_process_run_prints_no_timeline(pytester):
    pytester.makepyfile("def test_a():\n    pass\n")
    result = pytester.runpytest("-p", "no:randomly", "--harness-lane=interp")
    result.assert_outcomes(passed=1)
    assert not any("where the wall time went" in x for x in result.outlines)


CRASH = """
import os
def test_dies():
    os._exit(3)
def test_lives():
    pass
"""


def test_a_crashed_worker_is_counted_as_handing_over_nothing(pytester):
    """The worker that dies takes its readings with it; xdist's replacement and the other worker report theirs."""
    pytester.makepyfile(CRASH)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:randomly", "--harness-lane=interp")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([HEADER, "2 workers; *", "1 worker(s) handed over no timeline"])


def test_a_session_that_ended_at_its_start_renders_no_share():
    """Every clock reading 0 (a worker that ran nothing at once): no division by a zero span."""
    lines = render([WorkerTimes("gw0", 0.0, 0, 0.0, None, None)])
    assert lines[0] == ("1 workers; the last test ended 0.0 s after the session started; tests kept the workers "
                        "busy 0% of 1 × 0.0 s")
