"""Timing candidate plans in one process, fairly and within a budget.

Plans are timed in interleaved blocks (the order flips every round, so no
plan always follows the same one).  Two things make one process unfair to
the plan that runs second, and both are handled here:

* **Idle thread pools that keep spinning.**  An engine's worker threads may
  busy-wait after a run (ONNX Runtime's intra-op pool spins for ~40 ms on an
  idle machine, longer on a loaded one): the next plan's runs then share the
  cores with them, although in the session that plan would run alone.  Before
  a block of a different plan, :func:`wait_quiet` sleeps until the process's
  threads stop using CPU (process CPU time against wall time, so it needs no
  knowledge of the engines), at most ``MAX_QUIET_WAIT`` seconds (a wait that
  runs out means other threads of the process are busy, e.g. a server's:
  the timing then waits no more).
* **Cold caches.**  A short plan's block starts with an untimed run.

The timing stops after ``min_rounds`` rounds once the budget is spent, once
one plan is clearly ahead (every run of every other plan slower than
``CLEAR_FACTOR`` times its median), or once one plan is left (a plan whose
fastest run is ``DROP_FACTOR`` times the best median is timed no further).
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence

__all__ = ["CLEAR_FACTOR", "DROP_FACTOR", "MAX_QUIET_WAIT", "MIN_ROUNDS", "MAX_ROUNDS", "TimingResult",
           "time_blocks", "wait_quiet"]

MIN_ROUNDS, MAX_ROUNDS = 2, 25
#: timed runs per block: runs shorter than SHORT_RUN seconds get SHORT_BLOCK, longer ones LONG_BLOCK
SHORT_RUN, SHORT_BLOCK, LONG_BLOCK = 0.02, 2, 1
#: a plan whose fastest run is this many times the best plan's median is timed no further
DROP_FACTOR = 1.5
#: timing stops when every run of every other plan is over this many times the best plan's median
CLEAR_FACTOR = 1.1
#: wait_quiet: sleep slices (s), CPU/wall under which a slice is quiet, quiet slices needed, longest wait (s)
QUIET_SLICE, QUIET_BUSY, QUIET_SLICES, MAX_QUIET_WAIT = 0.002, 0.1, 4, 0.25


def wait_quiet(max_wait: float = MAX_QUIET_WAIT) -> float:
    """Sleep until no thread of this process has used CPU for ``QUIET_SLICES``
    slices in a row (another engine's pool spinning after its run), at most
    ``max_wait`` seconds; the seconds waited."""
    start = time.perf_counter()
    quiet = 0
    while quiet < QUIET_SLICES and time.perf_counter() - start < max_wait:
        cpu, wall = time.process_time(), time.perf_counter()
        time.sleep(QUIET_SLICE)
        busy = (time.process_time() - cpu) / max(time.perf_counter() - wall, 1e-9)
        quiet = quiet + 1 if busy < QUIET_BUSY else 0
    return time.perf_counter() - start


class TimingResult:
    """Per plan the timed runs (seconds); how the timing went."""

    __slots__ = ("runs", "rounds", "stopped", "quiet_wait_s", "dropped", "never_quiet")

    def __init__(self, runs: list[list[float]]) -> None:
        self.runs = runs
        self.rounds = 0
        self.stopped = ""  #: "budget", "clear lead", "one plan left", "max rounds"
        self.quiet_wait_s = 0.0
        self.dropped: list[int] = []
        self.never_quiet = False  #: a wait ran out: other threads of the process are busy, later waits skipped

    def summary(self) -> str:
        busy = " (the process stayed busy: no further waits)" if self.never_quiet else ""
        return (f"{self.rounds} round(s), stopped: {self.stopped}; {self.quiet_wait_s * 1e3:.0f} ms waited for "
                f"idle thread pools between plans{busy}")


def time_blocks(runners: Sequence[Callable[[], Any]], budget: float, *, min_rounds: int = MIN_ROUNDS,
                max_rounds: int = MAX_ROUNDS, previous: int | None = None) -> TimingResult:
    """Time ``runners`` (one run of each plan, already run once) in
    interleaved blocks within ``budget`` seconds (see the module docstring);
    ``previous``: the index of the plan that ran last."""
    result = TimingResult([[] for _ in runners])
    live = list(range(len(runners)))
    start = time.perf_counter()
    while live:
        for i in live if result.rounds % 2 == 0 else live[::-1]:  # alternate the order
            if previous is not None and previous != i and not result.never_quiet:
                waited = wait_quiet()
                result.quiet_wait_s += waited
                result.never_quiet = waited >= MAX_QUIET_WAIT  # busy for other reasons: wait no more
            times = result.runs[i]
            short = not times or statistics.median(times) < SHORT_RUN
            if short:
                runners[i]()  # untimed: the block's caches
            for _ in range(SHORT_BLOCK if short else LONG_BLOCK):
                t = time.perf_counter()
                runners[i]()
                times.append(time.perf_counter() - t)
            previous = i
        result.rounds += 1
        live = _close_enough(live, result)
        result.stopped = _stop_reason(live, result, time.perf_counter() - start >= budget, min_rounds, max_rounds)
        if result.stopped:
            return result
    return result


def _close_enough(live: list[int], result: TimingResult) -> list[int]:
    """The live plans whose fastest run is within DROP_FACTOR of the best median."""
    if len(live) < 2:
        return live
    best = min(statistics.median(result.runs[i]) for i in live)
    kept = [i for i in live if min(result.runs[i]) <= DROP_FACTOR * best]
    result.dropped.extend(i for i in live if i not in kept)
    return kept


def _stop_reason(live: list[int], result: TimingResult, spent: bool, min_rounds: int, max_rounds: int) -> str:
    if len(live) <= 1:
        return "one plan left"
    if result.rounds >= max_rounds:
        return "max rounds"
    if result.rounds < min_rounds:
        return ""
    medians = {i: statistics.median(result.runs[i]) for i in live}
    lead = min(medians, key=medians.__getitem__)
    if all(min(result.runs[i]) > CLEAR_FACTOR * medians[lead] for i in live if i != lead):
        return "clear lead"
    return "budget" if spent else ""
