"""The ``cost`` scheduler (alias ``max_performance``) and ``min_power``.

Candidate placements ("plans") are built and each is *evaluated*, not guessed:

* one plan per candidate backend: every node it supports on it, the rest as
  the priority scheduler would place them, and the same with the rest on the
  backup where it can run them (so "numpy only", "onnxruntime only",
  "npu_emu + numpy" are all candidates);
* the per-node plan: a Viterbi pass over the topological order choosing each
  node's backend from per-node costs (measured one-node probes on CPU
  backends, the backend's cost model where it has one), with transfer and
  partition-switch penalties, then tiny islands merged.

A plan's cost is its *projected latency*, the figure ``nnrt bench`` and
``Session.profile`` report (:mod:`nnrt_core.profiling.projection`): the sum over
its partitions (``partition_graph``: acyclic, pins and capabilities respected)
of the measured run time (median) on CPU backends or the simulated device time
of backends with a cost model, plus modelled host<->device transfers (bytes /
bandwidth + latency) and a fixed per-partition overhead.
The cheapest plan wins; measurements are cached per machine (see
:mod:`nnrt_schedulers.profiling`), and the partitions compiled while
measuring are handed to the session instead of being compiled again.

``min_power`` evaluates the same plans by estimated energy: each partition's
time times its device's power (``DeviceInfo.properties['power_w']`` or a
default by device type), transfers at host CPU power.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import ClassVar

from nnrt_core.plugin_api import hookimpl
from nnrt_core.ir import Node
from nnrt_core.plugin_api import (DEFAULT_POWER_W, PARTITION_OVERHEAD_SECONDS, CostModel, PartitionPlan,
                                  PlacementContext, PlacementResult, Scheduler, partition_graph)
from nnrt_schedulers.profiling import ProfileCache, Profiler, cache_directory

__all__ = ["CostScheduler", "MaxPerformanceScheduler", "MinPowerScheduler", "PlanEstimate", "MeasuredCostModel"]

log = logging.getLogger("nnrt.schedulers.cost")

#: a plan with more partitions (or backends) must beat a simpler one by more than this: measured host
#: partitions of a mixed plan vary by about this much between profiling and running on a loaded machine
SIMPLER_MARGIN = 0.10


@dataclass
class PlanEstimate:
    """One evaluated candidate placement."""

    label: str
    assignment: dict[str, str]
    seconds: float = math.inf  #: projected latency per run (host measured + device simulated + transfers)
    joules: float = math.inf  #: estimated energy per run
    host_seconds: float = 0.0  #: partitions measured on the host
    simulated_seconds: float = 0.0  #: partitions from a backend's cost model (simulated device time)
    partitions: list[tuple[PartitionPlan, float, str]] = field(default_factory=list)  #: plan, seconds, source
    transfer_seconds: float = 0.0
    problem: str | None = None  #: why it could not be evaluated
    end_to_end: bool = False  #: ``seconds`` is a measured whole run (not a sum of partitions)

    def to_dict(self) -> dict[str, object]:
        return {"label": self.label, "estimated_ms": self.seconds * 1e3, "estimated_mj": self.joules * 1e3,
                "projected_ms": self.seconds * 1e3, "host_ms": self.host_seconds * 1e3,
                "simulated_ms": self.simulated_seconds * 1e3,
                "partitions": len(self.partitions), "transfer_ms": self.transfer_seconds * 1e3,
                "end_to_end": self.end_to_end, "problem": self.problem}


class MeasuredCostModel(CostModel):
    """:class:`CostModel` whose node costs on CPU backends are measured
    (one-node probes, per-call overhead removed) instead of analytic."""

    def __init__(self, ctx: PlacementContext, profiler: Profiler) -> None:
        super().__init__(ctx)
        self.profiler = profiler
        self._overhead: dict[str, float] = {}

    def node_seconds(self, node: Node, backend: str) -> float:
        modeled = self.modeled_seconds(backend)
        if modeled is not None and node.name in modeled:
            return modeled[node.name]
        got = self.profiler.node_seconds(node, backend)
        if got is None:
            return self.analytic_seconds(node)
        return max(got[0] - self.call_overhead(backend), 0.0)

    def call_overhead(self, backend: str) -> float:
        """Per-call cost of a partition on ``backend`` (the fastest probe seen)."""
        return self._overhead.get(backend, 0.0)

    def note_probe(self, backend: str, seconds: float) -> None:
        self._overhead[backend] = min(self._overhead.get(backend, seconds), seconds)

    def switch_seconds(self, backend: str) -> float:
        return PARTITION_OVERHEAD_SECONDS + self.call_overhead(backend)


class CostScheduler(Scheduler):
    """Least estimated latency over measured candidate plans."""

    name = "cost"
    description = ("least estimated latency: measures single-backend and per-node plans (CPU timings cached "
                   "per machine, device cost models, transfer costs)")
    merge_islands = False  # the per-node plan merges its own islands; measured plans are kept as measured
    #: "latency" or "energy"
    objective: ClassVar[str] = "latency"

    def __init__(self) -> None:
        self.plans: list[PlanEstimate] = []  #: every candidate of the last placement, cheapest first
        self.chosen: PlanEstimate | None = None
        self.measured_partitions = 0  #: partitions timed by the last placement (0 = all from the cache)
        self.problems: list[str] = []  #: what could not be compiled or measured
        #: the per-node plan with its island merges (events, reasons), kept for when it is chosen
        self._per_node_merges = PlacementResult({})

    # ------------------------------------------------------------ placing
    def _place(self, ctx: PlacementContext) -> PlacementResult:
        cache = ProfileCache(cache_directory(ctx.config.cache_dir))
        profiler = Profiler(ctx, cache)
        model = MeasuredCostModel(ctx, profiler)
        try:
            candidates = self._candidate_plans(ctx, model)
            evaluated = [self._evaluate(ctx, model, profiler, label, a) for label, a in candidates]
            self._measure_end_to_end(profiler, evaluated)
        finally:
            cache.save()
        self.measured_partitions = profiler.measured
        self.problems = list(profiler.errors)
        feasible = [p for p in evaluated if p.problem is None]
        key = (lambda p: p.joules) if self.objective == "energy" else (lambda p: p.seconds)
        self.plans = sorted(feasible, key=key) + [p for p in evaluated if p.problem is not None]
        if not feasible:  # nothing could be measured: priority order, compile errors reported by the session
            self.chosen = None
            reasons = "; ".join(p.problem or "" for p in evaluated)[:500]
            log.warning("cost scheduler could not evaluate any plan (%s); using priority order", reasons)
            why = f"{self.name}: no plan could be evaluated ({reasons}); priority order"
            return PlacementResult(dict(candidates[0][1]), reasons={n.name: why for n in ctx.graph.nodes},
                                   considered=[dict(p.to_dict(), chosen=False) for p in self.plans])
        best = self._prefer_simple(self.plans[0], feasible, key)
        self.chosen = best
        self.plans = [best] + [p for p in self.plans if p is not best]
        others = ", ".join(f"{p.label} {self._score(p)}" for p in self.plans[1:4] if p.problem is None)
        why = f"{self.name}: plan {best.label!r} {self._score(best)}" + (f" (vs {others})" if others else "")
        merged = self._per_node_merges if best.label == "per-node" else PlacementResult({})
        return PlacementResult(
            dict(best.assignment), events=merged.events,
            reasons={n.name: merged.reasons.get(n.name, why) for n in ctx.graph.nodes if n.name not in ctx.pins},
            estimates={(plan.backend, tuple(plan.node_names())): (seconds, source)
                       for plan, seconds, source in best.partitions},
            considered=[dict(p.to_dict(), chosen=p is best) for p in self.plans])

    @staticmethod
    def _prefer_simple(best: PlanEstimate, feasible: list[PlanEstimate], key) -> PlanEstimate:
        """Among plans within ``SIMPLER_MARGIN`` of the best (and no worse than
        the best single-backend plan), the one with the fewest partitions, then
        backends: a win inside measurement noise is not worth extra partition
        switches or one more runtime sharing the host."""
        singles = [key(p) for p in feasible if p.label != "per-node"]
        bound = min([key(best) * (1 + SIMPLER_MARGIN)] + singles)
        close = [p for p in feasible if key(p) <= bound] or [best]
        return min(close, key=lambda p: (len(p.partitions), len({pl.backend for pl, _, _ in p.partitions}), key(p)))

    def _score(self, p: PlanEstimate) -> str:
        if self.objective == "energy":
            return f"{p.joules * 1e3:.3g} mJ"
        return f"{p.seconds * 1e3:.3g} ms"

    def _candidate_plans(self, ctx: PlacementContext, model: MeasuredCostModel) -> list[tuple[str, dict[str, str]]]:
        plans: list[tuple[str, dict[str, str]]] = []
        seen: set[tuple[tuple[str, str], ...]] = set()

        def add(label: str, assignment: dict[str, str]) -> None:
            sig = tuple(sorted(assignment.items()))
            if sig not in seen:
                seen.add(sig)
                plans.append((label, assignment))

        names = [b.name for b in ctx.backends] + ([ctx.backup.name] if ctx.backup is not None else [])
        backup = ctx.backup.name if ctx.backup is not None else None
        for b in dict.fromkeys(names):
            add(f"{b} only" if all(ctx.capabilities[b].supports(n.name) for n in ctx.graph.nodes)
                else f"{b} first", self._prefer(ctx, b))
            if backup is not None and backup != b:
                add(f"{b} + {backup}", self._prefer(ctx, b, backup))
        if len({b for b in names}) > 1:
            per_node = PlacementResult(self._per_node_plan(ctx, model))
            self.merge_small_islands(ctx, per_node, model)
            self._per_node_merges = per_node
            add("per-node", per_node.assignment)
        return plans

    @staticmethod
    def _prefer(ctx: PlacementContext, backend: str, rest: str | None = None) -> dict[str, str]:
        """Every node on ``backend`` where it can run, the rest on ``rest``
        where it can run them, else in priority order."""
        out = {}
        for n in ctx.graph.nodes:
            if n.name in ctx.pins:
                out[n.name] = ctx.pins[n.name]
            elif ctx.capabilities[backend].supports(n.name):
                out[n.name] = backend
            elif rest is not None and ctx.capabilities[rest].supports(n.name):
                out[n.name] = rest
            else:
                out[n.name] = ctx.candidates(n)[0].name
        return out

    # ----------------------------------------------------- per-node plan
    def _node_cost(self, model: MeasuredCostModel, node: Node, backend: str) -> float:
        seconds = model.node_seconds(node, backend)
        return seconds * model.power_watts(backend) if self.objective == "energy" else seconds

    def _transfer_cost(self, model: MeasuredCostModel, seconds: float) -> float:
        return seconds * DEFAULT_POWER_W["cpu"] if self.objective == "energy" else seconds

    def _per_node_plan(self, ctx: PlacementContext, model: MeasuredCostModel) -> dict[str, str]:
        """Viterbi over the topological order: state = backend of the current
        node; costs = node cost + transfers of its inputs from their producers'
        backends (along the state's path) + a switch penalty when the backend
        changes from the previous node."""
        nodes = ctx.graph.nodes
        # probes first, so the per-call overhead is known before costs are used
        options: list[list[str]] = []
        for n in nodes:
            cands = [ctx.pins[n.name]] if n.name in ctx.pins else [b.name for b in ctx.candidates(n)]
            options.append(list(dict.fromkeys(cands)))
            if len(cands) > 1:
                for b in cands:
                    if model.modeled_seconds(b) is None:
                        got = model.profiler.node_seconds(n, b)
                        if got is not None:
                            model.note_probe(b, got[0])
        index = {n.name: i for i, n in enumerate(nodes)}
        graph_outputs = {id(v) for v in ctx.graph.outputs}
        # state: backend -> (cost, path as list of backends)
        states: dict[str, tuple[float, list[str]]] = {"": (0.0, [])}
        for i, n in enumerate(nodes):
            new: dict[str, tuple[float, list[str]]] = {}
            out_cost = {b: sum(self._transfer_cost(model, model.transfer_seconds(v, b, ""))
                               for v in n.outputs if id(v) in graph_outputs) for b in options[i]}
            for b in options[i]:
                node_cost = self._node_cost(model, n, b)
                best: tuple[float, list[str]] | None = None
                for prev, (cost, path) in states.items():
                    c = cost + node_cost + out_cost[b]
                    if prev and prev != b:
                        switch = model.switch_seconds(b)
                        c += switch * model.power_watts(b) if self.objective == "energy" else switch
                    for v in n.all_inputs():
                        if v.producer is None or v.producer.name not in index:
                            if v.const is None:  # a graph input, fed from the host
                                c += self._transfer_cost(model, model.transfer_seconds(v, None, b))
                            continue
                        src = path[index[v.producer.name]]
                        c += self._transfer_cost(model, model.transfer_seconds(v, src, b))
                    if best is None or c < best[0]:
                        best = (c, path)
                assert best is not None
                new[b] = (best[0], best[1] + [b])
            states = new
        _, path = min(states.values(), key=lambda cp: cp[0])
        return {n.name: b for n, b in zip(nodes, path)}

    # --------------------------------------------------------- evaluation
    def _evaluate(self, ctx: PlacementContext, model: MeasuredCostModel, profiler: Profiler, label: str,
                  assignment: dict[str, str]) -> PlanEstimate:
        est = PlanEstimate(label, assignment)
        plans = partition_graph(ctx.graph, assignment)
        seconds = joules = 0.0
        for plan in plans:
            got = profiler.partition_seconds(plan)
            if got is None:
                est.problem = f"partition {plan.name} could not be measured" + (
                    f": {profiler.errors[-1]}" if profiler.errors else "")
                return est
            t, source = got
            overhead = PARTITION_OVERHEAD_SECONDS if len(plans) > 1 else 0.0
            est.partitions.append((plan, t, source))
            if source == "measured":
                est.host_seconds += t
            else:
                est.simulated_seconds += t
            seconds += t + overhead
            joules += (t + overhead) * model.power_watts(plan.backend)
        est.transfer_seconds = model.plan_transfer_seconds(plans)
        est.seconds = seconds + est.transfer_seconds
        est.joules = joules + est.transfer_seconds * DEFAULT_POWER_W["cpu"]
        return est


    @staticmethod
    def _measure_end_to_end(profiler: Profiler, evaluated: list[PlanEstimate]) -> None:
        """Plans made only of measured (CPU) partitions are re-timed as whole
        runs, interleaved, and that measurement replaces the sum of parts."""
        whole = [p for p in evaluated if p.problem is None and p.partitions
                 and all(src == "measured" for _, _, src in p.partitions)]
        if len(whole) < 2:
            return
        for p, seconds in zip(whole, profiler.time_plans([[pl for pl, _, _ in p.partitions] for p in whole])):
            if seconds is None:
                continue
            parts = sum(t for _, t, _ in p.partitions) or seconds
            p.joules *= seconds / (parts + p.transfer_seconds) if parts + p.transfer_seconds > 0 else 1.0
            p.seconds = p.host_seconds = seconds
            p.end_to_end = True


class MaxPerformanceScheduler(CostScheduler):
    """ORT-style policy name for the ``cost`` scheduler."""

    name = "max_performance"
    description = "policy: least estimated latency (same as 'cost')"


class MinPowerScheduler(CostScheduler):
    """Least estimated energy per run."""

    name = "min_power"
    description = ("policy: least estimated energy per run (partition time x device power_w, "
                   "defaults by device type)")
    objective = "energy"


@hookimpl
def nnrt_schedulers():
    return [CostScheduler, MaxPerformanceScheduler, MinPowerScheduler]
