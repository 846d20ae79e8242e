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
    overlapping = [[1.0, 1.02, 0.99, 1.0], [1.05, 1.06, 1.3, 1.08]]  # runs within 1.1x, median 1.07x
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
    assert " runs)" in event.message and " timed and " in event.message  # how many runs each plan got


def test_a_process_that_stays_busy_is_waited_for_once(monkeypatch):
    waits = []
    monkeypatch.setattr(timing, "wait_quiet", lambda: waits.append(1) or timing.MAX_QUIET_WAIT)
    a, b = (lambda: time.sleep(0.001)), (lambda: time.sleep(0.001))
    result = timing.time_blocks([a, b], budget=0.0, min_rounds=3)
    assert len(waits) == 1 and result.never_quiet and "no further waits" in result.summary()


class FakeClock:
    """A clock only the plans' runs move: each runner adds its plan's seconds (no real time is measured)."""

    def __init__(self):
        self.now = 0.0
        self.calls: list[int] = []

    def __call__(self) -> float:
        return self.now

    def plan(self, i: int, seconds):
        """Plan ``i``'s runner: its run takes ``seconds`` (a float, or a function of the run's index)."""
        def run():
            k = self.calls.count(i)
            self.calls.append(i)
            self.now += seconds(k) if callable(seconds) else seconds
        return run


def _timed(durations, *, first_runs=None, budget=100.0, **kw):
    clock = FakeClock()
    runners = [clock.plan(i, d) for i, d in enumerate(durations)]
    result = timing.time_blocks(runners, budget, clock=clock, wait=lambda: 0.0, first_runs=first_runs, **kw)
    return result, clock


def test_a_plan_whose_first_run_was_long_gets_no_untimed_run_before_its_first_block():
    result, clock = _timed([0.05, 0.0505], first_runs=[0.06, 0.06], max_rounds=1)
    assert clock.calls == [0, 0, 1, 1] and result.untimed == 0  # two timed runs each, nothing untimed
    assert [len(r) for r in result.runs] == [2, 2]
    result, clock = _timed([0.005, 0.00505], first_runs=[0.006, 0.006], max_rounds=1)
    assert clock.calls == [0, 0, 0, 1, 1, 1] and result.untimed == 2  # short runs: the block's caches first
    assert [len(r) for r in result.runs] == [2, 2]
    assert "4 timed and 2 untimed run(s)" in result.summary()


def test_a_decisive_lead_stops_the_timing_after_one_round():
    result, _ = _timed([0.010, 0.013], first_runs=[0.03, 0.03])  # every run of the second 1.3x the first's
    assert result.stopped == "decisive lead" and result.rounds == 1
    assert [len(r) for r in result.runs] == [2, 2]


def test_a_lead_under_the_decisive_factor_needs_the_minimum_rounds():
    result, _ = _timed([0.010, 0.0115], first_runs=[0.03, 0.03])  # 1.15x: clear, not decisive
    assert result.stopped == "clear lead" and result.rounds == timing.MIN_ROUNDS


def test_plans_within_the_tie_factor_in_every_round_stop_as_a_tie():
    result, _ = _timed([0.010, 0.0101], first_runs=[0.03, 0.03])  # 1 % apart, every round
    assert result.stopped == "tie" and result.rounds == timing.TIE_ROUNDS


def test_a_round_that_disagrees_is_no_tie():
    # the second plan's median is within 1 % but its runs of round 1 were 15 % slower: timed on
    burst = lambda k: 0.0115 if k in (2, 3, 4) else 0.0101  # noqa: E731 - its block of round 1 (untimed + 2)
    result, _ = _timed([0.010, burst], first_runs=[0.03, 0.03], max_rounds=timing.TIE_ROUNDS + 1)
    assert result.stopped == "max rounds" and result.rounds == timing.TIE_ROUNDS + 1


def test_close_plans_stop_at_the_budget_of_the_clock():
    result, clock = _timed([0.010, 0.0104], first_runs=[0.03, 0.03], budget=0.2)  # 4 % apart: neither rule
    assert result.stopped == "budget" and clock.now >= 0.2
    assert clock.now < 0.2 + 2 * 3 * 0.0104 + 1e-9  # one round past the budget at most (2 blocks of 3 runs)


def test_the_first_round_starts_with_the_plan_that_ran_last_and_each_round_switches_once():
    clock = FakeClock()
    waits = []
    runners = [clock.plan(0, 0.010), clock.plan(1, 0.013)]
    result = timing.time_blocks(runners, 100.0, clock=clock, wait=lambda: waits.append(len(clock.calls)) or 0.0,
                                previous=1, first_runs=[0.03, 0.03], min_rounds=2, max_rounds=2)
    assert result.rounds == 1 and result.stopped == "decisive lead"
    assert clock.calls == [1, 1, 0, 0]  # plan 1 ran last before the timing: it goes first, no switch
    assert waits == [0, 2]  # once before the timing (the first runs' pools), once at the one switch


def test_a_lead_in_every_round_is_clear_despite_one_lucky_run_of_the_other():
    # the second plan is 15 % slower in every round, but one of its runs came within 1.1x of the leader
    lucky = lambda k: 0.0104 if k == 1 else 0.0115  # noqa: E731
    result, _ = _timed([0.010, lucky], first_runs=[0.03, 0.03])
    assert result.stopped == "clear lead" and result.rounds == timing.MIN_ROUNDS


def test_a_lead_that_one_round_contradicts_is_not_clear():
    # medians 15 % apart, but in round 1 the second plan was the faster one: timed on (to the budget)
    flip = lambda k: 0.0095 if k in (2, 3, 4) else 0.0115  # noqa: E731 - its block of round 1 (untimed + 2)
    result, _ = _timed([0.010, flip], first_runs=[0.03, 0.03], budget=0.2)
    assert result.rounds > timing.MIN_ROUNDS and result.stopped in ("budget", "clear lead")
    ratios = timing._round_ratios(result, 1, 0)
    assert ratios[1] < 1.0  # the round that kept it going


def test_close_medians_that_the_rounds_do_not_agree_on_are_a_tie():
    # 1 % apart in the median; round 1 swaps the order by 10 % (a loaded machine): no consistent leader
    swap = lambda k: 0.0090 if k in (2, 3, 4) else 0.0101  # noqa: E731 - its block of round 1 (untimed + 2)
    result, _ = _timed([0.010, swap], first_runs=[0.03, 0.03])
    assert result.stopped == "tie" and result.rounds == timing.TIE_ROUNDS


# ------------------------------------------------------ a clear loser's blocks
def test_a_plan_over_the_loser_factor_twice_ends_its_block_after_one_run():
    """Its first run and its block's first run both over 5x the other plan's: one run, timed, then dropped."""
    result, clock = _timed([0.001, 0.02], first_runs=[0.0012, 0.025])
    assert clock.calls == [0, 0, 0, 1]  # plan 0: untimed + 2 timed; plan 1: one run (was untimed + 2 timed)
    assert result.runs[1] == [0.02] and result.untimed == 1 and result.cut == [1]
    assert result.stopped == "one plan left" and result.dropped == [1]
    assert "1 block(s) ended after one run" in result.summary()


def test_a_clear_loser_timed_first_in_the_round_is_cut_against_the_others_first_runs():
    result, clock = _timed([0.001, 0.02], first_runs=[0.0012, 0.025], previous=1)
    assert clock.calls == [1, 0, 0, 0] and result.cut == [1]


def test_a_long_loser_gets_one_run_not_two():
    """A plan of long runs (no untimed run) 25x behind: one run of it instead of two."""
    result, clock = _timed([0.01, 0.25], first_runs=[0.012, 0.3])
    assert clock.calls.count(1) == 1 and result.runs[1] == [0.25]
    assert result.stopped == "one plan left"


def test_a_plan_under_the_loser_factor_gets_its_whole_block():
    result, clock = _timed([0.001, 0.0045], first_runs=[0.0012, 0.005])  # 4.5x: not a clear loser
    assert clock.calls.count(1) == 3 and result.cut == []  # untimed + 2 timed, then dropped (DROP_FACTOR)
    assert result.dropped == [1]


def test_one_slow_figure_does_not_make_a_loser():
    """A plan whose first run was slow (cold) but whose block runs are close is timed in full."""
    result, clock = _timed([0.001, 0.0011], first_runs=[0.0012, 0.015], max_rounds=2)  # 12x, then 1.1x
    assert clock.calls.count(1) == 6 and result.cut == []  # two rounds of untimed + 2 timed
