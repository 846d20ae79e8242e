"""The scheduler contract: placing nodes on backends.

A scheduler plugin (entry-point group ``nnrt.schedulers``) provides
:class:`Scheduler` subclasses.  The runtime gathers every candidate backend's
capability answer into a :class:`PlacementContext`; the scheduler returns a
node -> backend assignment; the runtime checks it and partitions the graph
(``Scheduler.partition`` may be overridden for other strategies).
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from nnrt_core.backend.base import Backend, Capability
from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import ConfigError, PlacementError, UnsupportedNodeError
from nnrt_core.ir import Graph, Node
from nnrt_core.partitioning import PartitionPlan, partition_graph

__all__ = ["PlacementContext", "Scheduler", "NodePlacement", "PlacementEvent", "with_backup"]


def with_backup(backends: list[Backend], backup: Backend | None) -> list[Backend]:
    """``backends`` in priority order with the backup appended (once)."""
    if backup is None or any(b is backup for b in backends):
        return list(backends)
    return [*backends, backup]


@dataclass
class PlacementContext:
    """Everything a scheduler may use to decide a placement."""

    graph: Graph
    backends: list[Backend]  #: selected available backends, highest priority first
    backup: Backend | None
    capabilities: dict[str, Capability]  #: backend name -> its answer
    config: ScheduleConfig
    pins: Mapping[str, str] = field(default_factory=dict)

    def candidates(self, node: Node) -> list[Backend]:
        """Backends that can run ``node``, in priority order, backup last."""
        return [b for b in with_backup(self.backends, self.backup)
                if self.capabilities[b.name].supports(node.name)]

    def rejections(self, node: Node) -> dict[str, str]:
        """backend name -> why it rejected ``node`` (for reports and errors)."""
        out = {}
        for name, cap in self.capabilities.items():
            reason = cap.reason(node.name)
            if reason is not None:
                out[name] = reason
        return out


@dataclass
class NodePlacement:
    """Where one node runs and why."""

    node: str
    op_type: str
    backend: str
    partition: int = -1
    reason: str = ""
    rejected: dict[str, str] = field(default_factory=dict)  #: backend -> reason

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class PlacementEvent:
    """A visible fallback or warning raised while building a session."""

    kind: str  #: backend_unavailable | node_fallback | compile_fallback | option_ignored
    backend: str
    message: str
    nodes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Scheduler(abc.ABC):
    """Base class of placement strategies."""

    name: ClassVar[str]
    description: ClassVar[str] = ""

    def place(self, ctx: PlacementContext) -> dict[str, str]:
        """Return node name -> backend name for every node of ``ctx.graph``.

        Validates pins first and the scheduler's answer afterwards, so a
        strategy only implements ``_place``.
        """
        self._check_pins(ctx)
        unplaceable = [n for n in ctx.graph.nodes if n.name not in ctx.pins and not ctx.candidates(n)]
        if unplaceable:
            raise UnsupportedNodeError(_describe_unplaceable(ctx, unplaceable))
        assignment = self._place(ctx)
        for n in ctx.graph.nodes:
            b = assignment.get(n.name)
            if b is None:
                raise PlacementError(f"scheduler {self.name!r} left node {n.name!r} unplaced")
            if b not in ctx.capabilities:
                raise PlacementError(f"scheduler {self.name!r} placed node {n.name!r} on unknown backend {b!r}")
            if not ctx.capabilities[b].supports(n.name):
                raise PlacementError(
                    f"scheduler {self.name!r} placed node {n.name!r} on {b!r}, which rejected it: "
                    f"{ctx.capabilities[b].reason(n.name)}"
                )
        return assignment

    @abc.abstractmethod
    def _place(self, ctx: PlacementContext) -> dict[str, str]: ...

    def partition(self, graph: Graph, assignment: Mapping[str, str]) -> list[PartitionPlan]:
        return partition_graph(graph, assignment)

    @staticmethod
    def _check_pins(ctx: PlacementContext) -> None:
        names = {n.name for n in ctx.graph.nodes}
        for node, backend in ctx.pins.items():
            if node not in names:
                some = ", ".join(sorted(names)[:10])
                raise ConfigError(f"pin names unknown node {node!r}; nodes include: {some}")
            if backend not in ctx.capabilities:
                raise ConfigError(
                    f"pin {node!r} -> {backend!r}: backend is not selected; selected: "
                    + ", ".join(ctx.capabilities)
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
