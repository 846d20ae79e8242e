"""Stage 6: say where every node runs and why, and assemble the
:class:`CompiledModel` (steps, partitions, placement report, events)."""
from __future__ import annotations


from nnrt_core.compiler.backends import BackendSelection
from nnrt_core.compiler.model import CompiledModel, EventLog, PartitionInfo
from nnrt_core.compiler.place import Placement
from nnrt_core.config import ScheduleConfig
from nnrt_core.ir import Graph, Node, TensorType
from nnrt_core.passes import PassReport
from nnrt_core.placement import NodePlacement, PartitionPlan, PlacementContext, Scheduler
from nnrt_core.runtime.executor import ExecutionStep
from nnrt_core.runtime.output_check import DeclaredShapeWatch
from nnrt_core.storage.weights import SharingReport

__all__ = ["explain", "placement_events", "placement_report", "partition_info"]


def placement_events(graph: Graph, placement: Placement, selection: BackendSelection, events: EventLog) -> None:
    """Add the build's report events: nodes left to the backup (``node_fallback``)
    and the scheduler's decisions.  Only nodes on a backup that is not a selected
    backend can be fallbacks, so the per-node walk runs only then."""
    ctx, result = placement.context, placement.result
    backup = selection.backup.name if selection.backup is not None else None
    if backup is not None and ctx.backends and backup not in {x.name for x in ctx.backends}:
        nodes = [n.name for n in graph.nodes if _falls_back(n, result.assignment[n.name], backup, ctx)]
        if nodes:
            events.add("node_fallback", backup, f"{len(nodes)} node(s) fall back to backup {backup!r}", nodes)
    for e in result.events:  # scheduler decisions (island merges...), visible like fallbacks
        events.add(e.kind, e.backend, e.message, e.nodes)


def _falls_back(node: Node, backend: str, backup: str, ctx: PlacementContext) -> bool:
    """``node`` runs on the backup because no selected backend supports it (and it is not pinned)."""
    return (node.name not in ctx.pins and backend == backup
            and not any(ctx.capabilities[x.name].supports(node.name) for x in ctx.backends))


def placement_report(graph: Graph, placement: Placement, selection: BackendSelection,
                     scheduler: Scheduler) -> list[NodePlacement]:
    """One :class:`NodePlacement` per node with the reason for its backend
    (its events are :func:`placement_events`'; this runs when the report is read)."""
    ctx, result = placement.context, placement.result
    part_of = {n.name: p.index for p in placement.plans for n in p.nodes}
    first = ctx.backends[0].name if ctx.backends else None
    selected = {x.name for x in ctx.backends}
    backup = selection.backup.name if selection.backup is not None else None
    report: list[NodePlacement] = []
    for n in graph.nodes:
        b = result.assignment[n.name]
        rejected = ctx.rejections(n)
        if n.name in ctx.pins:
            reason = "pinned by config"
        elif b == backup and b not in selected and _falls_back(n, b, backup, ctx):
            reason = "backup: no selected backend supports it"
        elif n.name in result.reasons:
            reason = result.reasons[n.name]
        elif b != first and first is not None:
            reason = f"{first} rejected it" if first in rejected else f"chosen by {scheduler.name}"
        else:
            reason = f"chosen by {scheduler.name}"
        report.append(NodePlacement(n.name, n.qualified_op, b, part_of[n.name], reason, rejected))
    return report


def partition_info(plan: PartitionPlan) -> PartitionInfo:
    """The user's view of a partition (``details`` are filled when asked)."""
    return PartitionInfo(plan.index, plan.backend, tuple(plan.node_names()),
                         tuple(sorted({n.qualified_op for n in plan.nodes})),
                         tuple(v.name for v in plan.inputs), tuple(v.name for v in plan.outputs), {})


def declared_watch(graph: Graph, plan: PartitionPlan, name: str, events: EventLog) -> DeclaredShapeWatch | None:
    """The run-time comparison of ``plan``'s graph outputs with their unconfirmed declarations, if any."""
    unconfirmed = {v.name: d.declared for v in plan.outputs
                   if (d := graph.declared_outputs.get(v.name)) is not None and not d.corrected
                   and isinstance(d.declared, TensorType)}
    if not unconfirmed:
        return None
    return DeclaredShapeWatch(name, unconfirmed,
                              lambda out, message: events.add("declared_shape_mismatch", plan.backend, message))


def explain(graph: Graph, config: ScheduleConfig, selection: BackendSelection, scheduler: Scheduler,
            placement: Placement, events: EventLog, pass_report: PassReport,
            weight_sharing: SharingReport) -> CompiledModel:
    """The :class:`CompiledModel` of a build from its stages' results.  The
    placement report and the partitions' cost estimates are computed when
    first read (same content; the report's events are added now)."""
    placement_events(graph, placement, selection, events)
    steps = [ExecutionStep(compiled, selection.named(plan.backend), [v.name for v in plan.inputs],
                           [v.name for v in plan.outputs], types={v.name: v.type for v in plan.outputs},
                           declared=declared_watch(graph, plan, compiled.name, events))
             for plan, compiled in zip(placement.plans, placement.compiled)]
    constants = {v.name: v.const for v in graph.outputs if v.const is not None and v.producer is None}
    placement = placement.replace(context=placement.context.replace(compiled={}))
    return CompiledModel(
        config=config, graph=graph, steps=steps, partitions=[partition_info(p) for p in placement.plans],
        placement=lambda: placement_report(graph, placement, selection, scheduler), events=events,
        constants=constants, backends=list(selection.backends), backup=selection.backup, scheduler=scheduler,
        estimates=lambda: scheduler.estimate_partitions(placement.context, placement.result, placement.plans,
                                                        placement.compiled),
        considered_plans=[dict(p) for p in placement.result.considered], pass_report=pass_report,
        folded_nodes=pass_report.rewrites("constant_folding"), weight_sharing=weight_sharing)
