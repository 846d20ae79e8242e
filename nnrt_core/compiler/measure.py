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
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Callable, Sequence

import numpy as np

from nnrt_core.backend.base import Backend
from nnrt_core.compiler.backends import BackendSelection
from nnrt_core.compiler.model import CompiledModel, EventLog
from nnrt_core.compiler.plan_timing import MIN_ROUNDS, time_blocks
from nnrt_core.config import AUTO_SCHEDULER, ScheduleConfig
from nnrt_core.errors import ConfigError, NnrtError
from nnrt_core.ir import Graph
from nnrt_core.ir.clone import clone_graph
from nnrt_core.ir.types import TensorType
from nnrt_core.logs import INFO
from nnrt_core.placement import PlanCandidate, Scheduler
from nnrt_core.runtime.executor import Executor

__all__ = ["AUTO", "MEASURE_ENV", "MIN_ROUNDS", "SPLIT_MARGIN", "build_measured", "engines_of", "output_error",
           "measurement_feeds", "resolve_scheduler"]

AUTO = AUTO_SCHEDULER
#: ``NNRT_MEASURE=0``: ``scheduler="auto"`` never measures (static priority order)
MEASURE_ENV = "NNRT_MEASURE"
#: a split plan wins only when its median is below this fraction of the best whole-model plan's
SPLIT_MARGIN = 0.97
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


def measurement_feeds(graph: Graph, seed: int = 0, free: int = 1) -> dict[str, np.ndarray]:
    """Inputs to time plans with: the graph inputs' static shapes (a free
    dimension taken as ``free``; ``input_shapes`` fixes them at load), floats from a
    standard normal, integers and booleans zero (valid as indices and masks)."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for v in graph.inputs:
        if not isinstance(v.type, TensorType) or v.type.shape is None:
            raise ConfigError(f"scheduler 'measured': input {v.name!r} has no known rank ({v.type}); "
                              "give input_shapes or choose a scheduler that does not measure")
        shape = tuple(d if isinstance(d, int) else free for d in v.type.shape)
        dtype = v.type.dtype.numpy
        if dtype.kind == "f":
            feeds[v.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[v.name] = np.zeros(shape, dtype)
    return feeds


#: measurement inputs larger than this are not allocated: the first candidate plan is built unmeasured
MAX_FEED_BYTES = 1 << 30


#: free input dimensions tried, in order, until some candidate plan runs (a model may need more
#: than 1 along one: audio longer than its first convolution's window, a sequence over a kernel)
FREE_DIM_SIZES = (1, 64, 1024)


def _feed_bytes(graph: Graph, free: int = 1) -> int:
    """Bytes :func:`measurement_feeds` would allocate (free dimensions as ``free``; 0 for untyped inputs)."""
    total = 0
    for v in graph.inputs:
        if isinstance(v.type, TensorType) and v.type.shape is not None:
            n = 1
            for d in v.type.shape:
                n *= d if isinstance(d, int) else free
            try:
                total += n * v.type.dtype.numpy.itemsize
            except TypeError:  # no numpy equivalent: measurement_feeds reports it
                continue
    return total


def build_measured(graph: Graph, config: ScheduleConfig, selection: BackendSelection, events: EventLog,
                   candidates: Sequence[PlanCandidate], registry_scheduler: Callable[[str], Scheduler],
                   build_plan: BuildPlan) -> CompiledModel:
    """Build the scheduler's ``candidates`` (``Scheduler.candidate_plans``, at
    least one) of ``graph``, time them and return the fastest (see the module docstring)."""
    if config.precision == AUTO:
        candidates = with_precisions(candidates, config, selection, graph)
    size = _feed_bytes(graph)
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
        try:
            model = build_plan(clone_graph(graph), sub, sub_selection, EventLog(), registry_scheduler(cand.scheduler))
            built.append((cand, model, None))
        except NnrtError as e:  # e.g. a node no backend of this plan runs: the plan is out, the others stay
            built.append((cand, None, f"build failed: {type(e).__name__}: {str(e).splitlines()[0][:300]}"))
    built = _without_duplicates(built)
    budget = min(MAX_BUDGET, max(MIN_BUDGET, BUDGET_FRACTION * (time.perf_counter() - t0)))
    results, free = _time_on_free_sizes(graph, built, budget)
    model = _chosen(built, results, config, events)
    if free != 1:  # say which inputs the figures are for
        model.events.add("plan_measured", "measurement inputs", f"no candidate plan ran with the free input "
                         f"dimensions taken as 1; measured with them taken as {free}", level=INFO)
    return model


def _time_on_free_sizes(graph: Graph, built: Sequence[tuple[PlanCandidate, CompiledModel | None, str | None]],
                        budget: float) -> tuple[list[dict], int]:
    """:func:`_time_plans` on measurement inputs with the free dimensions
    taken as each of ``FREE_DIM_SIZES`` in turn, until some plan runs (the
    first size only, for a graph without free dimensions); the results and the size used."""
    has_free = any(isinstance(v.type, TensorType) and v.type.shape is not None
                   and any(not isinstance(d, int) for d in v.type.shape) for v in graph.inputs)
    results: list[dict] = []
    used = FREE_DIM_SIZES[0]
    for free in FREE_DIM_SIZES if has_free else FREE_DIM_SIZES[:1]:
        if free != FREE_DIM_SIZES[0] and _feed_bytes(graph, free) > MAX_FEED_BYTES:
            break
        tried = _time_plans(built, measurement_feeds(graph, free=free), budget)
        if not results or any(r["runs"] for r in tried):
            results, used = tried, free
        if any(r["runs"] for r in tried):
            break
    return results, used


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


def _split_placed_as(cand: PlanCandidate, built: Sequence[tuple[PlanCandidate, CompiledModel | None, str | None]]
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


def _time_plans(built: Sequence[tuple[PlanCandidate, CompiledModel | None, str | None]],
                feeds: dict[str, np.ndarray], budget: float) -> list[dict]:
    """Per candidate: ``{"runs": [seconds...], "problem": str | None}``
    (and ``"outputs"`` of its first run), timed by :func:`.plan_timing.time_blocks`."""
    results = [{"runs": [], "problem": problem} for _, _, problem in built]
    live: list[tuple[Executor, dict]] = []
    first: list[float] = []  # the first runs' seconds: a long one warmed its plan (no untimed run before timing)
    for (cand, model, _), res in zip(built, results):
        if model is None:
            continue
        g = model.graph
        ex = Executor(model.steps, [v.name for v in g.outputs], model.constants, [v.name for v in g.inputs])
        t = time.perf_counter()
        try:
            res["outputs"] = ex.run(dict(feeds))  # the first run: one-time costs, whether it runs at all
        except Exception as e:  # noqa: BLE001 - a plan that cannot run loses, with the reason
            res["problem"] = f"run failed: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
            continue
        first.append(time.perf_counter() - t)
        live.append((ex, res))
    if not live:
        return results
    timing = time_blocks([lambda ex=ex: ex.run(dict(feeds)) for ex, _ in live], budget, previous=len(live) - 1,
                         first_runs=first)
    for (_, res), runs in zip(live, timing.runs):
        res["runs"] = runs
        res["timing"] = timing.summary()
    return results


def _chosen(built: Sequence[tuple[PlanCandidate, CompiledModel | None, str | None]], results: list[dict],
            config: ScheduleConfig, events: EventLog) -> CompiledModel:
    medians = [statistics.median(r["runs"]) if r["runs"] else None for r in results]
    errors = _errors(built, results, medians)
    eligible = [m is not None for m in medians]
    for i, err in enumerate(errors):
        if err is not None and not err <= config.precision_tolerance:
            eligible[i] = False  # a plan that changes the answer this much is never chosen, whatever its label
            results[i]["problem"] = (f"error {err:.3g} of max|fp32 output| is over precision_tolerance "
                                     f"{config.precision_tolerance:g}")
    whole = [m for (c, _, _), m, ok in zip(built, medians, eligible) if ok and not c.split]
    best_whole = min(whole) if whole else None

    def rank(i: int) -> float:
        m = medians[i]
        if m is None or not eligible[i]:
            return float("inf")
        split = built[i][0].split
        return m / SPLIT_MARGIN if split and best_whole is not None else m  # a split must beat the margin

    order = sorted(range(len(built)), key=rank)
    win = order[0]
    unmeasured = None
    if not eligible[win]:
        problems = "; ".join(f"{c.label}: {r['problem']}" for (c, _, _), r in zip(built, results))
        unmeasured = _unmeasured_choice(built, results)
        if unmeasured is None:
            raise ConfigError(f"scheduler 'measured': no candidate plan could be built and run ({problems})")
        win = unmeasured
        order = [win] + [i for i in order if i != win]
    cand, model, _ = built[win]
    assert model is not None
    considered = []
    for i in order:
        c, m, _ = built[i]
        considered.append({
            "label": c.label, "backends": list(c.backends), "split": c.split, "source": "measured",
            "estimated_ms": None if medians[i] is None else medians[i] * 1e3,
            "runs": len(results[i]["runs"]), "partitions": len(m.steps) if m is not None else 0,
            "chosen": i == win, "end_to_end": True, "problem": results[i]["problem"],
            "precision": c.precision or config.precision, "max_rel_err": errors[i]})
    if unmeasured is None:
        why = _why(cand, medians[win], built, medians, [r["problem"] for r in results],
                   [len(r["runs"]) for r in results])
        timing = next((r["timing"] for r in results if "timing" in r), None)
        if timing:
            why += f"; timed in {timing}"
    else:  # the synthetic inputs, not every plan, are the likely culprit: the static choice, said so
        why = (f"no candidate plan ran on the measurement inputs (free dimensions taken as "
               f"{', '.join(map(str, FREE_DIM_SIZES))}; integers 0): {problems}; built {cand.label!r} without "
               "measuring (the priority order); give input_shapes (and real feeds) to measure")
    merged = EventLog(events)
    merged.extend(model.events)
    merged.add("plan_measured", ",".join(cand.backends), why, level=INFO)
    model.events, model.considered_plans = merged, considered
    return model


def _unmeasured_choice(built: Sequence[tuple[PlanCandidate, CompiledModel | None, str | None]],
                       results: list[dict]) -> int | None:
    """When every plan that was built failed only at its runs on the
    measurement inputs (silero VAD: a sample rate of 0 and 64 or 1024 samples
    take a branch it cannot run), the plan the priority order makes, in fp32:
    the priority split, or the whole-model plan it was placed as, else the
    first fp32 plan built.  ``None`` when no plan was built."""
    ran = [i for i, (_, m, _) in enumerate(built) if m is not None]
    if not ran or not all(str(results[i]["problem"] or "").startswith("run failed") for i in ran):
        return None
    fp32 = [i for i in ran if built[i][0].precision in (None, "fp32")]  # never a lower precision unmeasured
    labels = {built[i][0].label: i for i in fp32}
    for cand, _, problem in built:
        if cand.split and cand.precision in (None, "fp32"):
            if cand.label in labels:
                return labels[cand.label]
            same = next((lab for lab in labels if problem and f"placed exactly as {lab!r}" in problem), None)
            if same is not None:
                return labels[same]
    return fp32[0] if fp32 else None


def _errors(built: Sequence[tuple[PlanCandidate, CompiledModel | None, str | None]], results: list[dict],
            medians: list[float | None]) -> list[float | None]:
    """Per plan: its worst output's ``max|out - ref| / max|ref|`` against the
    fastest fp32 plan's outputs on the same feeds (None: no outputs to compare)."""
    fp32 = [i for i, (c, m, _) in enumerate(built)
            if c.precision in (None, "fp32") and medians[i] is not None and "outputs" in results[i]]
    if not fp32:
        return [None] * len(built)
    # the reference: an fp32 plan on real engines first (an emulated chip may store fp32 requests in fp16)
    ref = results[min(fp32, key=lambda i: (_emulated(built[i][1]), medians[i]))]["outputs"]
    out: list[float | None] = []
    for res in results:
        got = res.get("outputs")
        if got is None or res["problem"] is not None:
            out.append(None)
            continue
        worst = 0.0
        for a, b in zip(got, ref):
            worst = max(worst, output_error(np.asarray(a), np.asarray(b)))
        out.append(worst)
    return out


def output_error(got: np.ndarray, ref: np.ndarray) -> float:
    """``max|got - ref| / max|ref|`` over the reference's finite values; the
    non-finite ones (an attention mask's -inf, a NaN) must come out the same.
    ``inf`` when the error cannot be measured (another shape, a NaN or inf
    where the reference is finite), so such a plan is never chosen."""
    if got.shape != ref.shape:
        return float("inf")
    if got.dtype.kind not in "biuf" or not got.size:
        return 0.0 if np.array_equal(got, ref) else float("inf")
    a64, b64 = got.astype(np.float64), ref.astype(np.float64)
    finite = np.isfinite(b64)
    if not np.array_equal(a64[~finite], b64[~finite], equal_nan=True):
        return float("inf")
    if not finite.any():
        return 0.0
    ref_finite = b64[finite]
    scale = float(np.max(np.abs(ref_finite))) or 1.0
    err = float(np.max(np.abs(a64[finite] - ref_finite))) / scale
    return err if np.isfinite(err) else float("inf")


def _emulated(model: CompiledModel | None) -> bool:
    return model is not None and any(getattr(st.backend, "emulated", False) for st in model.steps)


def _why(cand: PlanCandidate, median: float, built: Sequence[tuple[PlanCandidate, CompiledModel | None, str | None]],
         medians: list[float | None], problems: list[str | None], runs: list[int]) -> str:
    figures = ", ".join(f"{c.label} {m * 1e3:.3g} ms ({n} runs)" if m is not None else f"{c.label} ({problem})"
                        for (c, _, _), m, n, problem in zip(built, medians, runs, problems))
    text = f"measured plans on the session's input shapes (median per run): {figures}; chose {cand.label!r}"
    if not cand.split and any(c.split and m is not None and m < median for (c, _, _), m in zip(built, medians)):
        text += f" (a split plan is kept only when under {SPLIT_MARGIN:g}x the best whole-model plan)"
    return text
