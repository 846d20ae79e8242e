"""Measured selection: compile a scheduler's candidate plans, time them on the
session's input shapes, keep the fastest.

A scheduler whose :meth:`~nnrt_core.placement.Scheduler.candidate_plans` is
not empty (``measured``) asks the build for several plans: typically each
engine alone (the backup takes what it declines) and the priority split
between them.  Each is built from a clone of the loaded graph (its own passes,
placement and compile), run once (a plan that fails to run is dropped, with
the error in the report), then timed in interleaved blocks on the same feeds
until the time budget is spent (at least ``MIN_ROUNDS`` rounds) or one plan
is clearly ahead, waiting before each block for the previous plan's idle
thread pools to stop spinning (:mod:`nnrt_core.compiler.plan_timing`).  The plan
with the lowest median wins; a split plan only when its median is under
``SPLIT_MARGIN`` times the best whole-model plan's, because a split pays at
every cut and two engines' thread pools share the cores.

The chosen plan is the session's: its config names the winner's backends and
scheduler (so specializations for new input shapes build that plan, without
measuring again), every candidate's figures are in ``considered_plans``
(``source: "measured"``) and a ``plan_measured`` event says what won and why.
With ``cache_dir`` the cache stores the chosen plan under the measuring
config's key: another process with the same cache loads it and measures nothing.

With ``precision="auto"`` every whole-model plan is also built in each
reduced precision its engine's device offers (``DeviceInfo.precisions``;
int8 only for a model with QuantizeLinear/DequantizeLinear nodes).  Every
plan's outputs on the measurement inputs are compared with the fastest fp32
plan's on real (not emulated) engines: a plan whose error (``max|out - ref| /
max|ref|``, the worst output) exceeds ``precision_tolerance`` is out, whatever
precision it claims; the fastest of the rest wins, and the report gives every
plan's precision, error and time.

``backends="auto"`` with the default ``scheduler="auto"`` measures when two
or more real engines (not emulated, not the backup) are selected;
``NNRT_MEASURE=0`` turns that off (the static priority order then places).

The inputs (:mod:`nnrt_core.compiler.measure_inputs`): the config's
``measure_feeds`` (real inputs, :mod:`nnrt_core.feed_sets`), else synthetic
ones of the graph inputs' shapes.  Each plan's first run is under
``RunControl(quiet=True)``: a plan failing on them raises without its
engine's error line on stderr.  The choice and the report:
:mod:`nnrt_core.compiler.measure_choice` (a plan not chosen keeps its events
in its ``considered_plans`` entry, out of the session's).
"""
from __future__ import annotations

import os
import time
from typing import Callable, Sequence

import numpy as np

from nnrt_core.backend.base import Backend
from nnrt_core.compiler.backends import BackendSelection
from nnrt_core.compiler.measure_choice import SPLIT_MARGIN, Built, chosen, output_error
from nnrt_core.compiler.measure_inputs import FREE_DIM_SIZES, MAX_FEED_BYTES, feed_trials, measured_bytes, \
    measurement_feeds
from nnrt_core.compiler.model import CompiledModel, EventLog, HeldEventLog
from nnrt_core.compiler.plan_timing import MIN_ROUNDS, time_blocks
from nnrt_core.config import AUTO_SCHEDULER, ScheduleConfig
from nnrt_core.control import RunControl
from nnrt_core.errors import NnrtError
from nnrt_core.ir import Graph
from nnrt_core.ir.clone import clone_graph
from nnrt_core.logs import INFO
from nnrt_core.placement import PlanCandidate, Scheduler
from nnrt_core.runtime.executor import Executor

__all__ = ["AUTO", "FREE_DIM_SIZES", "MAX_FEED_BYTES", "MEASURE_ENV", "MIN_ROUNDS", "SPLIT_MARGIN", "build_measured",
           "engines_of", "measurement_feeds", "output_error", "resolve_scheduler", "with_precisions"]

AUTO = AUTO_SCHEDULER
#: ``NNRT_MEASURE=0``: ``scheduler="auto"`` never measures (static priority order)
MEASURE_ENV = "NNRT_MEASURE"
#: the timing budget: this fraction of the candidates' build time, within these bounds (seconds)
BUDGET_FRACTION, MIN_BUDGET, MAX_BUDGET = 0.5, 0.15, 3.0

#: (graph, config, selection, events, scheduler) -> CompiledModel: the build of one plan
BuildPlan = Callable[[Graph, ScheduleConfig, BackendSelection, EventLog, Scheduler], CompiledModel]


def engines_of(selection: BackendSelection) -> list[Backend]:
    """The selected backends other than the backup (priority order)."""
    backup = selection.backup.name if selection.backup is not None else None
    return [b for b in selection.backends if b.name != backup]


def resolve_scheduler(config: ScheduleConfig, selection: BackendSelection) -> str:
    """The scheduler a build uses: ``config.scheduler``, with ``"auto"``
    resolved to ``measured`` (two or more real engines, measuring on) or ``priority``."""
    if config.scheduler != AUTO:
        return config.scheduler
    if config.precision == "auto":  # choosing a precision is measuring
        return "measured"
    real = [b for b in engines_of(selection) if not b.emulated]
    on = os.environ.get(MEASURE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")
    return "measured" if on and len(real) >= 2 else "priority"


def build_measured(graph: Graph, config: ScheduleConfig, selection: BackendSelection, events: EventLog,
                   candidates: Sequence[PlanCandidate], registry_scheduler: Callable[[str], Scheduler],
                   build_plan: BuildPlan) -> CompiledModel:
    """Build the scheduler's ``candidates`` (``Scheduler.candidate_plans``, at
    least one) of ``graph``, time them and return the fastest (see the module docstring)."""
    if config.precision == AUTO:
        candidates = with_precisions(candidates, config, selection, graph)
    size = measured_bytes(graph, config)
    if len(candidates) == 1 or size > MAX_FEED_BYTES:  # nothing to choose between, or too big to time: say so
        cand = candidates[0]
        why = (f"one candidate plan ({cand.label!r}): built without measuring" if len(candidates) == 1 else
               f"measurement inputs would take {size:,} bytes (over {MAX_FEED_BYTES:,}): built the first "
               f"candidate plan ({cand.label!r}) without measuring")
        sub = config.replace(backends=tuple(cand.backends), scheduler=cand.scheduler,
                             precision=cand.precision or config.precision)
        model = build_plan(graph, sub, _sub_selection(selection, cand, sub), events, registry_scheduler(cand.scheduler))
        model.events.add("plan_measured", ",".join(cand.backends), why, level=INFO)
        return model
    built: list[tuple[PlanCandidate, CompiledModel | None, str | None]] = []
    t0 = time.perf_counter()
    for cand in candidates:
        same = _split_placed_as(cand, built)
        if same is not None:  # its first engine took every node alone: the split is that plan, not built again
            built.append((cand, None, f"placed exactly as {same!r}: not built again"))
            continue
        sub = config.replace(backends=tuple(cand.backends), scheduler=cand.scheduler,
                             precision=cand.precision or config.precision)
        sub_selection = _sub_selection(selection, cand, sub)
        try:  # its events held back: only the chosen plan's are the session's
            model = build_plan(clone_graph(graph), sub, sub_selection, HeldEventLog(),
                               registry_scheduler(cand.scheduler))
            built.append((cand, model, None))
        except NnrtError as e:  # e.g. a node no backend of this plan runs: the plan is out, the others stay
            built.append((cand, None, f"build failed: {type(e).__name__}: {str(e).splitlines()[0][:300]}"))
    built = _without_duplicates(built)
    budget = min(MAX_BUDGET, max(MIN_BUDGET, BUDGET_FRACTION * (time.perf_counter() - t0)))
    results, free = _time_on_trials(graph, config, built, budget)
    model = chosen(built, results, config, events)
    feeds = config.measure_feeds
    if free is None and feeds is not None:
        model.events.add("plan_measured", "measurement inputs", f"measured on the measure_feeds given "
                         f"({len(feeds.sets)} feed set(s) per run, {feeds.digest})", level=INFO)
    elif free is not None and free != 1:  # say which inputs the figures are for
        model.events.add("plan_measured", "measurement inputs", f"no candidate plan ran with the free input "
                         f"dimensions taken as 1; measured with them taken as {free}", level=INFO)
    return model


def _time_on_trials(graph: Graph, config: ScheduleConfig, built: Built, budget: float
                    ) -> tuple[list[dict], int | None]:
    """:func:`_time_plans` on each of :func:`.measure_inputs.feed_trials` in
    turn until some plan runs; the results and the free size used (``None``: the config's feeds)."""
    results: list[dict] = []
    used: int | None = FREE_DIM_SIZES[0]
    for free, feed_sets in feed_trials(graph, config):
        tried = _time_plans(built, feed_sets, budget)
        if not results or any(r["runs"] for r in tried):
            results, used = tried, free
        if any(r["runs"] for r in tried):
            break
    return results, used


def _time_plans(built: Built, feed_sets: list[dict[str, np.ndarray]], budget: float) -> list[dict]:
    """Per candidate: ``{"runs": [seconds...], "problem": str | None}``
    (and ``"outputs"`` of its first run over every feed set), timed by
    :func:`.plan_timing.time_blocks`; one run is a run of every set."""
    results = [{"runs": [], "problem": problem} for _, _, problem in built]
    live: list[tuple[Executor, dict]] = []
    first: list[float] = []  # the first runs' seconds: a long one warmed its plan (no untimed run before timing)
    for (cand, model, _), res in zip(built, results):
        if model is None:
            continue
        g = model.graph
        ex = Executor(model.steps, [v.name for v in g.outputs], model.constants, [v.name for v in g.inputs])
        t = time.perf_counter()
        try:  # the first run: one-time costs, whether it runs at all (quiet: a failure is expected here)
            res["outputs"] = [o for feeds in feed_sets for o in ex.run(dict(feeds), control=RunControl(quiet=True))]
        except Exception as e:  # noqa: BLE001 - a plan that cannot run loses, with the reason
            res["problem"] = f"run failed: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
            continue
        first.append(time.perf_counter() - t)
        live.append((ex, res))
    if not live:
        return results
    timing = time_blocks([lambda ex=ex: [ex.run(dict(feeds)) for feeds in feed_sets] for ex, _ in live], budget,
                         previous=len(live) - 1, first_runs=first)
    for (_, res), runs in zip(live, timing.runs):
        res["runs"] = runs
        res["timing"] = timing.summary()
    return results


def _sub_selection(selection: BackendSelection, cand: PlanCandidate, sub: ScheduleConfig) -> BackendSelection:
    """The candidate's backends (and the backup) with the options of its config (its precision)."""
    backends = [selection.named(n) for n in cand.backends]
    names = {b.name for b in backends} | ({selection.backup.name} if selection.backup is not None else set())
    return BackendSelection(backends, selection.backup, {n: sub.compile_options(n) for n in names})


def with_precisions(candidates: Sequence[PlanCandidate], config: ScheduleConfig, selection: BackendSelection,
                    graph: Graph) -> list[PlanCandidate]:
    """``precision="auto"``: each candidate in fp32, and each whole-model one
    also in every reduced precision its engine's device offers."""
    quantized = any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in graph.nodes)
    out = []
    for cand in candidates:
        out.append(PlanCandidate(cand.label, cand.backends, cand.scheduler, cand.split, "fp32"))
        if cand.split or len(cand.backends) != 1:
            continue
        for p in _reduced_precisions(selection.named(cand.backends[0]), config):
            if p != "int8" or quantized:
                out.append(PlanCandidate(f"{cand.label}, {p}", cand.backends, cand.scheduler, False, p))
    return out


def _reduced_precisions(backend: Backend, config: ScheduleConfig) -> list[str]:
    """The precisions other than fp32 that ``backend``'s configured device computes in."""
    if "precision" not in backend.supported_options:
        return []
    try:
        device = backend.find_device(config.devices.get(backend.name))
    except NnrtError:
        return []
    return [p for p in device.precisions if p in ("fp16", "bf16", "int8")]


def _split_placed_as(cand: PlanCandidate, built: Built
                     ) -> str | None:
    """The label of a built whole-model plan a priority split would repeat:
    one of the split's first engine, in the same precision, that put every
    node on that engine (priority then gives every node to it too)."""
    if not cand.split or cand.scheduler != "priority" or not cand.backends:
        return None
    first = cand.backends[0]
    for c, model, _ in built:
        if (model is not None and not c.split and c.backends == (first,) and c.precision == cand.precision
                and model.partitions and all(p.backend == first for p in model.partitions)):
            return c.label
    return None


def _without_duplicates(built: list[tuple[PlanCandidate, CompiledModel | None, str | None]]
                        ) -> list[tuple[PlanCandidate, CompiledModel | None, str | None]]:
    """A plan placed exactly as an earlier one is not timed again (e.g. a
    split whose first engine took every node); a split that put every node on
    one backend counts as that backend's whole-model plan."""
    seen: dict[tuple, str] = {}
    out = []
    for cand, model, problem in built:
        if model is None:
            out.append((cand, model, problem))
            continue
        layout = (cand.precision, tuple((p.backend, p.nodes) for p in model.partitions))
        if layout in seen:
            out.append((cand, None, f"placed exactly as {seen[layout]!r}: not timed again"))
            continue
        seen[layout] = cand.label
        if cand.split and len({p.backend for p in model.partitions}) <= 1:
            cand = PlanCandidate(cand.label, cand.backends, cand.scheduler, split=False)
        out.append((cand, model, problem))
    return out
