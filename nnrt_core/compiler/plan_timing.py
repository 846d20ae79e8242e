"""Timing candidate plans in one process, fairly and within a budget.

Plans are timed in interleaved blocks (the order flips every round, so no
plan always follows the same one; the first round starts with the plan whose
first run came last, so a round has one switch between plans, not two).  Two
things make one process unfair to the plan that runs second, and both are
handled here:

* **Idle thread pools that keep spinning.**  An engine's worker threads may
  busy-wait after a run (ONNX Runtime's intra-op pool spins for ~40 ms on an
  idle machine, longer on a loaded one): the next plan's runs then share the
  cores with them, although in the session that plan would run alone.  Before
  a block of a different plan, :func:`wait_quiet` sleeps until the process's
  threads stop using CPU (process CPU time against wall time, so it needs no
  knowledge of the engines), at most ``MAX_QUIET_WAIT`` seconds (a wait that
  runs out means other threads of the process are busy, e.g. a server's:
  the timing then waits no more).
* **Cold caches.**  A short plan's block starts with an untimed run.  A plan
  whose first run (made before the timing, for its outputs and one-time
  costs) took ``SHORT_RUN`` or more gets none: its first block times two runs.

A block ends after one run on a *clear loser*: a plan whose last two
figures (its first run and this block's run, or the runs of two blocks;
untimed runs are timed for this) are each over ``LOSER_FACTOR`` times every
figure of another live plan.  That run counts as timed, so the plan has a
median, and the round's drop (below) then times it no further: the budget is
not spent on an obvious loser (OpenVINO's plan of speaker_dvector_int8, ~7x
ONNX Runtime's, took two or three runs of ~60 ms before).

The timing stops (sequential comparison; the reason is in the report):

* after any round, once one plan is left: a plan whose fastest run is
  ``DROP_FACTOR`` times the best median is timed no further;
* after the first round, on a *decisive lead*: every run of every other plan
  slower than ``DECISIVE_FACTOR`` times the leader's slowest run;
* after ``min_rounds`` rounds, on a *clear lead*: every other plan either
  slower than ``CLEAR_FACTOR`` times the leader's median in every run, or
  with its median over ``CLEAR_FACTOR`` times the leader's and slower than
  the leader in every round (one lucky short run no longer keeps the timing going);
* after ``TIE_ROUNDS`` rounds, on a *tie*: every other plan's median within
  ``TIE_FACTOR`` of the leader's and, in every round, its mean within
  ``TIE_ROUND_FACTOR`` of the leader's, or faster than the leader in some
  round (whichever is kept costs at most ~2 %);
* once the budget is spent (after ``min_rounds``), or after ``max_rounds``.
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence

__all__ = ["CLEAR_FACTOR", "DECISIVE_FACTOR", "DROP_FACTOR", "LOSER_FACTOR", "MAX_QUIET_WAIT", "MIN_ROUNDS", "MAX_ROUNDS",
           "TIE_FACTOR", "TIE_ROUNDS", "TIE_ROUND_FACTOR", "TimingResult", "time_blocks", "wait_quiet"]

MIN_ROUNDS, MAX_ROUNDS = 2, 25
#: timed runs per block: runs shorter than SHORT_RUN seconds get SHORT_BLOCK, longer ones LONG_BLOCK
SHORT_RUN, SHORT_BLOCK, LONG_BLOCK = 0.02, 2, 1
#: a plan whose fastest run is this many times the best plan's median is timed no further
DROP_FACTOR = 1.5
#: a block ends after one run when the plan's last two figures are each over this many times another's every figure
LOSER_FACTOR = 5.0
#: timing stops after one round when every run of every other plan is over this many times the leader's slowest
DECISIVE_FACTOR = 1.2
#: timing stops when every run of every other plan is over this many times the best plan's median
CLEAR_FACTOR = 1.1
#: timing stops as a tie after TIE_ROUNDS rounds: medians within TIE_FACTOR, every round's means within TIE_ROUND_FACTOR
TIE_FACTOR, TIE_ROUND_FACTOR, TIE_ROUNDS = 1.02, 1.06, 3
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
    """Per plan the timed runs (seconds) and the round of each; how the timing went."""

    __slots__ = ("runs", "rounds_of", "rounds", "stopped", "quiet_wait_s", "dropped", "never_quiet", "untimed",
                 "figures", "cut")

    def __init__(self, runs: list[list[float]], first_runs: Sequence[float] | None = None) -> None:
        self.runs = runs
        #: per plan, the seconds of every run seen: its first run (when given), then each timing run, untimed too
        self.figures: list[list[float]] = [[] if first_runs is None else [first_runs[i]] for i in range(len(runs))]
        self.cut: list[int] = []  #: the plans whose block ended after one run (a clear loser), once per block
        self.rounds_of: list[list[int]] = [[0] * len(r) for r in runs]  #: the round of each timed run
        self.rounds = 0
        self.stopped = ""  #: "budget", "decisive lead", "clear lead", "tie", "one plan left", "max rounds"
        self.quiet_wait_s = 0.0
        self.dropped: list[int] = []
        self.never_quiet = False  #: a wait ran out: other threads of the process are busy, later waits skipped
        self.untimed = 0  #: untimed runs made at the start of blocks (cold caches)

    def summary(self) -> str:
        busy = " (the process stayed busy: no further waits)" if self.never_quiet else ""
        timed = sum(len(r) for r in self.runs)
        cut = (f"; {len(self.cut)} block(s) ended after one run (a plan over {LOSER_FACTOR:g}x slower than "
               f"another twice)" if self.cut else "")
        return (f"{self.rounds} round(s), stopped: {self.stopped}; {timed} timed and {self.untimed} untimed "
                f"run(s){cut}; {self.quiet_wait_s * 1e3:.0f} ms waited for idle thread pools between plans{busy}")


def time_blocks(runners: Sequence[Callable[[], Any]], budget: float, *, min_rounds: int = MIN_ROUNDS,
                max_rounds: int = MAX_ROUNDS, previous: int | None = None,
                first_runs: Sequence[float] | None = None,
                clock: Callable[[], float] = time.perf_counter,
                wait: Callable[[], float] | None = None) -> TimingResult:
    """Time ``runners`` (one run of each plan, already run once; ``first_runs``:
    the seconds those first runs took) in interleaved blocks within ``budget``
    seconds (see the module docstring); ``previous``: the index of the plan
    that ran last.  ``clock`` and ``wait`` (default :func:`wait_quiet`) are
    the timer and the wait between plans."""
    result = TimingResult([[] for _ in runners], first_runs)
    live = list(range(len(runners)))
    start = clock()
    reverse = previous is not None and previous == live[-1]  # the first round starts with the plan that ran last
    if previous is not None:  # the first runs ran back to back: every pool they left spinning stops first
        _wait(result, wait)
    while live:
        for i in live[::-1] if (result.rounds % 2 == 0) == reverse else live:  # alternate the order
            if previous is not None and previous != i and not result.never_quiet:
                _wait(result, wait)
            _block(runners[i], i, result, None if first_runs is None else first_runs[i], clock,
                   [j for j in live if j != i])
            previous = i
        result.rounds += 1
        live = _close_enough(live, result)
        result.stopped = _stop_reason(live, result, clock() - start >= budget, min_rounds, max_rounds)
        if result.stopped:
            return result
    return result


def _wait(result: TimingResult, wait: Callable[[], float] | None) -> None:
    waited = (wait or wait_quiet)()
    result.quiet_wait_s += waited
    result.never_quiet = waited >= MAX_QUIET_WAIT  # busy for other reasons: wait no more


def _block(run: Callable[[], Any], i: int, result: TimingResult, first: float | None,
           clock: Callable[[], float], others: Sequence[int] = ()) -> None:
    """One block of plan ``i``: an untimed run when its runs are short, then
    its timed runs; only one run, counted as timed, once the plan is a clear
    loser against one of ``others`` (:func:`_clear_loser`)."""
    times = result.runs[i]
    if times:
        short = statistics.median(times) < SHORT_RUN
        warm, timed = short, SHORT_BLOCK if short else LONG_BLOCK
    else:  # the first block: two timed runs; untimed first unless the first run was long
        warm, timed = first is None or first < SHORT_RUN, SHORT_BLOCK
    for k in range(int(warm) + timed):
        t = clock()
        run()  # the first one untimed when warm: the block's caches (timed all the same, for _clear_loser)
        took = clock() - t
        result.figures[i].append(took)
        loser = _clear_loser(i, others, result)
        if k < int(warm) and not loser:
            result.untimed += 1
            continue
        times.append(took)
        result.rounds_of[i].append(result.rounds)
        if loser:
            result.cut.append(i)
            return


def _clear_loser(i: int, others: Sequence[int], result: TimingResult) -> bool:
    """Plan ``i``'s last two figures each over LOSER_FACTOR times every figure of one of ``others``."""
    mine = result.figures[i][-2:]
    if len(mine) < 2:
        return False
    fastest = min(mine)  # both figures over the factor means the faster of the two is over it
    return any(result.figures[j] and fastest > LOSER_FACTOR * max(result.figures[j]) for j in others)


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
    medians = {i: statistics.median(result.runs[i]) for i in live}
    lead = min(medians, key=medians.__getitem__)
    others = [i for i in live if i != lead]
    if all(min(result.runs[i]) > DECISIVE_FACTOR * max(result.runs[lead]) for i in others):
        return "decisive lead"
    if result.rounds < min_rounds:
        return ""
    if all(min(result.runs[i]) > CLEAR_FACTOR * medians[lead] or _lost_every_round(result, i, lead, medians)
           for i in others):
        return "clear lead"
    if result.rounds >= TIE_ROUNDS and all(_tied(result, i, lead, medians) for i in others):
        return "tie"
    return "budget" if spent else ""


def _round_ratios(result: TimingResult, i: int, lead: int) -> list[float]:
    """Per round both plans were timed in: plan ``i``'s mean run over the leader's
    (neighbouring blocks, so a change of the machine's load between rounds cancels out)."""
    out = []
    for r in range(result.rounds):
        a = [t for t, k in zip(result.runs[i], result.rounds_of[i]) if k == r]
        b = [t for t, k in zip(result.runs[lead], result.rounds_of[lead]) if k == r]
        if a and b:
            out.append(statistics.fmean(a) / max(statistics.fmean(b), 1e-12))
    return out


def _lost_every_round(result: TimingResult, i: int, lead: int, medians: dict[int, float]) -> bool:
    """Plan ``i``'s median over CLEAR_FACTOR times the leader's, and slower than the leader in every round."""
    ratios = _round_ratios(result, i, lead)
    return medians[i] > CLEAR_FACTOR * medians[lead] and bool(ratios) and all(x > 1.0 for x in ratios)


def _tied(result: TimingResult, i: int, lead: int, medians: dict[int, float]) -> bool:
    """Plan ``i`` within TIE_FACTOR of the leader's median, and within
    TIE_ROUND_FACTOR of the leader's mean in every round both were timed in
    or faster than the leader in some round (on a loaded machine the rounds
    scatter more than TIE_ROUND_FACTOR, and then a leader they do not agree on
    is noise too)."""
    if medians[i] > TIE_FACTOR * medians[lead]:
        return False
    ratios = _round_ratios(result, i, lead)
    disagree = any(x < 1.0 for x in ratios) and any(x > 1.0 for x in ratios)  # the rounds do not agree on a leader
    return disagree or all(1 / TIE_ROUND_FACTOR <= x <= TIE_ROUND_FACTOR for x in ratios)
