"""The scheduler contract: placing nodes on backends.

A scheduler plugin (entry-point group ``nnrt.schedulers``) provides
:class:`Scheduler` subclasses.  The runtime gathers every candidate backend's
capability answer into a :class:`PlacementContext`; the scheduler answers a
:class:`PlacementResult` (node -> backend, with reasons, events, estimates);
the runtime checks it and partitions the graph (``Scheduler.partition`` may be
overridden for other strategies).

After ``_place`` the base class merges tiny islands (:func:`merge_islands`)
using a :class:`CostModel`.  Every move is reported (an ``island_merged``
event and the node's placement reason).
"""
from __future__ import annotations

import abc
from typing import ClassVar, Mapping, Sequence

from nnrt_core.backend.base import CompiledPartition, estimated_seconds_of
from nnrt_core.errors import ConfigError, PlacementError, UnsupportedNodeError
from nnrt_core.ir import Graph, Node
from nnrt_core.placement.context import PlacementContext, PlacementEvent, PlacementResult
from nnrt_core.placement.cost_model import CostModel
from nnrt_core.placement.partitioning import PartitionPlan, merge_islands, partition_graph

__all__ = ["PlanCandidate", "Scheduler"]


class PlanCandidate:
    """A plan a measuring scheduler asks the build to compile and time: the
    backends it may use (priority order; the session's backup takes the rest),
    the scheduler that places it, and whether it splits the model between
    engines (a split is kept only when measured faster than every whole-model plan)."""

    __slots__ = ("label", "backends", "scheduler", "split", "precision")

    def __init__(self, label: str, backends: Sequence[str], scheduler: str, split: bool = False,
                 precision: str | None = None) -> None:
        self.label, self.backends, self.scheduler, self.split = label, tuple(backends), scheduler, split
        #: the precision the plan computes in (None: the config's; ``precision="auto"`` sets it per plan)
        self.precision = precision

    def __repr__(self) -> str:
        return (f"PlanCandidate({self.label!r}, {self.backends!r}, {self.scheduler!r}, split={self.split}, "
                f"precision={self.precision!r})")


class Scheduler(abc.ABC):
    """Base class of placement strategies."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    #: move tiny islands to a neighbouring backend after ``_place`` (see merge_islands)
    merge_islands: ClassVar[bool] = True
    #: largest partition (in nodes) island merging may move; ``None``: any
    #: partition whose transfers and switch cost more than it saves
    island_max_nodes: ClassVar[int | None] = None

    def place(self, ctx: PlacementContext) -> PlacementResult:
        """Place every node of ``ctx.graph``: a :class:`PlacementResult`.

        Validates pins first and the scheduler's answer afterwards, so a
        strategy only implements ``_place``.
        """
        self._check_pins(ctx)
        unplaceable = [n for n in ctx.graph.nodes if n.name not in ctx.pins and ctx.first_candidate(n) is None]
        if unplaceable:
            raise UnsupportedNodeError(_describe_unplaceable(ctx, unplaceable))
        answer = self._place(ctx)
        result = answer if isinstance(answer, PlacementResult) else PlacementResult(dict(answer))
        for n in ctx.graph.nodes:
            b = result.assignment.get(n.name)
            if b is None:
                raise PlacementError(f"scheduler {self.name!r} left node {n.name!r} unplaced")
            if b not in ctx.capabilities:
                raise PlacementError(f"scheduler {self.name!r} placed node {n.name!r} on unknown backend {b!r}")
            if not ctx.capabilities[b].supports(n.name):
                raise PlacementError(
                    f"scheduler {self.name!r} placed node {n.name!r} on {b!r}, which rejected it: "
                    f"{ctx.capabilities[b].reason(n.name)}"
                )
        if self.merge_islands and len(set(result.assignment.values())) > 1:  # one backend: no islands
            self.merge_small_islands(ctx, result, self.cost_model(ctx))
        return result

    def candidate_plans(self, engines: Sequence[str]) -> list[PlanCandidate]:
        """Plans the build should compile and time on the session's input
        shapes, keeping the fastest (``nnrt_core.compiler.measure``); the
        default, an empty list, places the model this scheduler's one way.
        ``engines`` are the selected backends other than the backup."""
        return []

    def estimate_partitions(self, ctx: PlacementContext, result: PlacementResult, plans: list[PartitionPlan],
                            compiled: list[CompiledPartition]) -> dict[int, tuple[float, str]]:
        """plan index -> (estimated seconds per run, source) for reports: what
        the scheduler measured, else the backend's cost model, else the
        analytic estimate.  Never fails (reports must not break a session)."""
        out: dict[int, tuple[float, str]] = {}
        model: CostModel | None = None
        for plan, part in zip(plans, compiled):
            key = (plan.backend, tuple(plan.node_names()))
            try:
                if key in result.estimates:
                    out[plan.index] = result.estimates[key]
                    continue
                sec = estimated_seconds_of(part)
                if sec is not None:
                    out[plan.index] = (float(sec), "cost model")
                    continue
                model = model or CostModel(ctx)
                out[plan.index] = (model.nodes_seconds(plan.nodes, plan.backend), "analytic")
            except Exception:  # pragma: no cover - a report value, never fatal
                continue
        return out

    def cost_model(self, ctx: PlacementContext) -> CostModel:
        """The estimates used for island merging (override to add measurements)."""
        return CostModel(ctx)

    def merge_small_islands(self, ctx: PlacementContext, result: PlacementResult, model: CostModel) -> None:
        """Move ``result``'s tiny islands where the cost model says it pays
        off; each move is recorded in ``result.events`` and ``result.reasons``."""
        merged, moves = merge_islands(
            ctx.graph, result.assignment,
            can_run=lambda node, backend: ctx.capabilities[backend].supports(node),
            island_seconds=model.nodes_seconds,
            transfer_seconds=model.transfer_seconds,
            switch_seconds=model.switch_seconds,
            locked=set(ctx.pins), max_nodes=self.island_max_nodes,
        )
        result.assignment = merged
        for m in moves:
            result.events.append(PlacementEvent("island_merged", m.target, m.describe(), list(m.nodes)))
            for n in m.nodes:
                result.reasons[n] = f"island merged from {m.source!r} into {m.target!r} (saves transfers/switch)"

    @abc.abstractmethod
    def _place(self, ctx: PlacementContext) -> PlacementResult | Mapping[str, str]:
        """The strategy: a :class:`PlacementResult`, or just node -> backend."""

    def partition(self, graph: Graph, assignment: Mapping[str, str]) -> list[PartitionPlan]:
        return partition_graph(graph, assignment)

    @staticmethod
    def _check_pins(ctx: PlacementContext) -> None:
        if not ctx.pins:  # the usual case: no set of node names to build
            return
        names = {n.name for n in ctx.graph.nodes}
        for node, backend in ctx.pins.items():
            if node not in names:
                import difflib  # error path only: ~5 ms of import
                close = difflib.get_close_matches(node, list(names), n=5, cutoff=0.5)
                hint = f"did you mean {', '.join(close)}? " if close else ""
                some = ", ".join(sorted(names)[:10]) + (f", ... ({len(names)} nodes)" if len(names) > 10 else "")
                raise ConfigError(f"pin names unknown node {node!r}; {hint}nodes include: {some}")
            if backend not in ctx.capabilities:
                raise ConfigError(
                    f"pin {node!r} -> {backend!r}: backend is not selected; selected: "
                    + ", ".join(ctx.capabilities) + " (add it to backends or use one of those)"
                )
            cap = ctx.capabilities[backend]
            if not cap.supports(node):
                raise UnsupportedNodeError(f"node {node!r} is pinned to {backend!r}, which rejects it: {cap.reason(node)}")


def _describe_unplaceable(ctx: PlacementContext, nodes: list[Node]) -> str:
    lines = [f"{len(nodes)} node(s) cannot run on any selected backend or the backup:"]
    for n in nodes[:20]:
        why = "; ".join(f"{b}: {r}" for b, r in ctx.rejections(n).items()) or "no backend selected"
        lines.append(f"  {n.name} ({n.qualified_op}, opset {n.opset}): {why}")
    if len(nodes) > 20:
        lines.append(f"  ... and {len(nodes) - 20} more")
    return "\n".join(lines)
