"""Timing candidate plans in one process (nnrt_core/compiler/plan_timing.py):
a plan whose threads keep spinning after its runs does not slow the next
plan's timing; the timing stops early when one plan is clearly ahead, and
within its budget otherwise."""
from __future__ import annotations

import sys
import threading
import time

import pytest

import nnrt_core.compiler.plan_timing as timing
from nnrt_core import ScheduleConfig, Session
from test_partitioning import chain
from test_schedulers import ELEMENTWISE, registry, timed_backend


class Spinner:
    """A run that sleeps ``delay`` and then leaves a thread busy-looping for
    ``spin`` seconds (until its next run), as an engine's spinning pool does;
    it holds the GIL, so other Python code on the main thread waits for it."""

    def __init__(self, delay: float, spin: float = 0.06):
        self.delay, self.spin = delay, spin
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def __call__(self) -> None:
        self.halt()
        time.sleep(self.delay)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._busy, args=(self.stop, time.perf_counter() + self.spin),
                                       daemon=True)
        self.thread.start()

    @staticmethod
    def _busy(stop: threading.Event, until: float) -> None:
        time.sleep(0.0005)  # the run returns first (it would wait for the GIL otherwise)
        while not stop.is_set() and time.perf_counter() < until:
            pass

    def halt(self) -> None:
        if self.thread is not None:
            self.stop.set()
            self.thread.join()


@pytest.fixture
def slow_gil_handoff(monkeypatch):
    """A 20 ms switch interval: a thread woken while another busy-loops waits ~20 ms for the GIL."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.02)
    yield
    sys.setswitchinterval(old)


def test_wait_quiet_waits_for_a_busy_thread_and_not_without_one(slow_gil_handoff):
    spinner = Spinner(0.0, spin=0.08)
    timing.wait_quiet()  # an earlier test's engine pool may still be spinning down
    quiet = timing.wait_quiet()
    assert quiet < 0.06  # nothing running: a few quiet slices
    spinner()
    t0 = time.perf_counter()
    waited = timing.wait_quiet()
    assert waited >= 0.05 and not spinner.thread.is_alive() or time.perf_counter() - t0 >= timing.MAX_QUIET_WAIT
    spinner.halt()


def test_a_spinning_plan_does_not_make_the_next_plan_look_slow(slow_gil_handoff):
    spinner = Spinner(0.004)
    steady = lambda: time.sleep(0.002)  # noqa: E731 - truly faster, but wakes into the spinner's thread
    spinner(), steady()
    result = timing.time_blocks([spinner, steady], budget=0.3, previous=1)
    spinner.halt()
    med = [sorted(r)[len(r) // 2] for r in result.runs]
    assert med[1] < med[0], (med, result.summary())
    assert result.quiet_wait_s > 0.03  # it waited for the spinner's thread before timing steady


def test_timing_stops_at_a_clear_lead_after_the_minimum_rounds():
    def stop(runs, rounds, spent=False):
        result = timing.TimingResult(runs)
        result.rounds = rounds
        return timing._stop_reason(list(range(len(runs))), result, spent, timing.MIN_ROUNDS, timing.MAX_ROUNDS)

    ahead = [[1.0, 1.02, 0.99, 1.0], [1.2, 1.25, 1.3, 1.21]]  # every run of the second over 1.1x the first's median
    assert stop(ahead, timing.MIN_ROUNDS - 1) == ""  # never before the minimum rounds
    assert stop(ahead, timing.MIN_ROUNDS) == "clear lead"
    overlapping = [[1.0, 1.02, 0.99, 1.0], [1.2, 1.05, 1.3, 1.21]]  # one run of the second within 1.1x
    assert stop(overlapping, timing.MIN_ROUNDS) == "" and stop(overlapping, timing.MIN_ROUNDS, spent=True) == "budget"
    assert stop(overlapping, timing.MAX_ROUNDS) == "max rounds"
    assert stop([[1.0]], 1) == "one plan left"


def test_close_plans_are_timed_until_the_budget_and_no_longer():
    a, b = (lambda: time.sleep(0.002)), (lambda: time.sleep(0.002))
    t0 = time.perf_counter()
    result = timing.time_blocks([a, b], budget=0.15)
    spent = time.perf_counter() - t0
    assert result.stopped  # "budget", or on a loaded machine a noisy "clear lead" / "one plan left"
    assert result.rounds >= timing.MIN_ROUNDS or result.stopped == "one plan left"
    assert spent < 0.15 + 0.5  # one round past the budget at most (a round: 2 blocks and their waits)


def test_a_plan_far_behind_is_dropped_and_timing_stops_when_one_is_left():
    fast, far = (lambda: time.sleep(0.001)), (lambda: time.sleep(0.02))
    result = timing.time_blocks([fast, far], budget=10.0, min_rounds=5)
    assert result.stopped == "one plan left" and result.rounds == 1 and result.dropped == [1]


def test_the_measured_report_says_how_the_timing_went():
    slow = timed_backend("slow", ELEMENTWISE, delay=0.004, priority=100, device_type="cpu")
    fast = timed_backend("fast", ELEMENTWISE, delay=0.0, device_type="cpu")
    slow.emulated = fast.emulated = False
    sess = Session(chain("Relu", "Neg"), ScheduleConfig(backends=["slow", "fast"], backup=None,
                                                       scheduler="measured"), registry=registry(slow, fast))
    (event,) = [e for e in sess.events if e.kind == "plan_measured"]
    assert "timed in " in event.message and "stopped: " in event.message and "idle thread pools" in event.message


def test_a_process_that_stays_busy_is_waited_for_once(monkeypatch):
    waits = []
    monkeypatch.setattr(timing, "wait_quiet", lambda: waits.append(1) or timing.MAX_QUIET_WAIT)
    a, b = (lambda: time.sleep(0.001)), (lambda: time.sleep(0.001))
    result = timing.time_blocks([a, b], budget=0.0, min_rounds=3)
    assert len(waits) == 1 and result.never_quiet and "no further waits" in result.summary()
