"""Stages 3-5: place every node, partition the graph, compile each partition;
a partition that fails to compile gives its nodes back for re-placement."""
from __future__ import annotations

from nnrt_core.backend.base import Backend, Capability, CompiledPartition
from nnrt_core.backend.facts import shared_facts
from nnrt_core.compiler.backends import BackendSelection
from nnrt_core.compiler.model import EventLog
from nnrt_core.compiler.timing import stage
from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import CompileError, NnrtError, PlacementError
from nnrt_core.ir import Graph
from nnrt_core.placement.deferred import DeferredCapability
from nnrt_core.placement import PartitionKey, PartitionPlan, PlacementContext, PlacementResult, Scheduler
from nnrt_core.record import Record

__all__ = ["Placement", "place_and_compile"]


class Placement(Record):
    """The outcome of placing and compiling: the context the scheduler saw,
    its answer, the partitions and their compiled forms (same order)."""

    __slots__ = ("context", "result", "plans", "compiled")
    context: PlacementContext
    result: PlacementResult
    plans: list[PartitionPlan]
    compiled: list[CompiledPartition]

    def __init__(self, context: PlacementContext, result: PlacementResult, plans: list[PartitionPlan],
                 compiled: list[CompiledPartition]) -> None:
        self.context, self.result, self.plans, self.compiled = context, result, plans, compiled


def place_and_compile(graph: Graph, config: ScheduleConfig, selection: BackendSelection, scheduler: Scheduler,
                      events: EventLog) -> Placement:
    """Ask every candidate backend for its capability, then place, partition
    and compile until every partition compiles (``compile_fallback`` events).
    Backends may reuse per-node facts of their capability check when they
    compile (:mod:`nnrt_core.backend.facts`)."""
    with shared_facts():
        return _place_and_compile(graph, config, selection, scheduler, events)


def _place_and_compile(graph: Graph, config: ScheduleConfig, selection: BackendSelection, scheduler: Scheduler,
                       events: EventLog) -> Placement:
    caps = _capabilities(graph, config, selection, events)
    compiled_cache: dict[PartitionKey, CompiledPartition] = {}
    for _attempt in range(1 + len(graph.nodes) * max(1, len(caps))):
        ctx = PlacementContext(graph, selection.backends, selection.backup, caps, config, config.pins,
                               compiled=compiled_cache, options=selection.options)
        result, plans = _schedule(scheduler, ctx)
        compiled = _compile_all(graph, config, selection, plans, compiled_cache)
        if isinstance(compiled, list):
            return Placement(ctx, result, plans, compiled)
        plan, err = compiled
        names = plan.node_names()
        for n in names:
            caps[plan.backend].supported.discard(n)
            caps[plan.backend].rejected[n] = f"partition failed to compile: {err}"
        events.add("compile_fallback", plan.backend,
                   f"backend {plan.backend!r} failed to compile partition {plan.name} "
                   f"({len(names)} nodes): {err}; re-placing its nodes", names)
    raise CompileError("placement did not converge")  # pragma: no cover - each attempt removes a (node, backend) pair


def _capabilities(graph: Graph, config: ScheduleConfig, selection: BackendSelection,
                  events: EventLog) -> dict[str, Capability]:
    """Every candidate's capability answer (``plugin_fault`` events for broken
    plugins).  A backup that is not a selected backend and answers node by node
    is asked when its answer is first read (:class:`DeferredCapability`)."""
    caps: dict[str, Capability] = {}
    for b in selection.candidates:
        if b is selection.backup and selection.backends and b not in selection.backends and _per_node(b):
            caps[b.name] = DeferredCapability(b.name, lambda b=b: b.capability(graph, selection.options[b.name]))
            continue
        cap = caps[b.name] = b.capability(graph, selection.options[b.name])
        if cap.fault is not None:  # a broken plugin: its nodes go to the other backends
            events.add("plugin_fault", b.name, f"backend {b.name!r}: {cap.fault}; its nodes fall back to other "
                       "backends", sorted(cap.rejected))
    return caps


def _per_node(backend: Backend) -> bool:
    """``backend`` answers capability through the base class's per-node loop
    (its ``_supports``): that answer can neither raise nor be malformed (no
    ``plugin_fault``), so asking later changes no error and no event."""
    return all("_capability" not in vars(k) for k in type(backend).__mro__ if k is not Backend)


def _schedule(scheduler: Scheduler, ctx: PlacementContext) -> tuple[PlacementResult, list[PartitionPlan]]:
    """The scheduler's placement and partitions; a scheduler plugin raising
    something other than an nnrt error is a :class:`PlacementError` naming it."""
    try:
        result = scheduler.place(ctx)
        return result, scheduler.partition(ctx.graph, result.assignment)
    except NnrtError:
        raise
    except Exception as e:
        raise PlacementError(f"scheduler {getattr(scheduler, 'name', type(scheduler).__name__)!r} failed: "
                             f"{type(e).__name__}: {e}") from e


def _compile_all(graph: Graph, config: ScheduleConfig, selection: BackendSelection, plans: list[PartitionPlan],
                 cache: dict[PartitionKey, CompiledPartition]
                 ) -> list[CompiledPartition] | tuple[PartitionPlan, CompileError]:
    """Every plan compiled (reusing ``cache``), or the first plan that failed and why."""
    out: list[CompiledPartition] = []
    for plan in plans:
        key = (plan.backend, tuple(plan.node_names()))
        compiled = cache.get(key)
        if compiled is None:
            backend = selection.named(plan.backend)
            try:
                with stage(f"compile:{backend.name}", exclude_from="place"):
                    part = plan.to_graph(graph, share=backend.compiles_read_only)  # no copy of a whole graph
                    compiled = backend.compile(part, selection.options[backend.name])
            except CompileError as e:
                return plan, e
            cache[key] = compiled
        out.append(compiled)
    return out
