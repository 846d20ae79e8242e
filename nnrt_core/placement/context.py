"""What a scheduler is given (:class:`PlacementContext`) and what it answers
(:class:`PlacementResult`), and the records of a placement kept by a session."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from nnrt_core.backend.base import Backend, Capability, CompiledPartition
from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import ConfigError
from nnrt_core.ir import Graph, Node

__all__ = ["PartitionKey", "PlacementContext", "PlacementResult", "NodePlacement", "PlacementEvent", "with_backup"]

#: (backend name, node names in order): identifies a partition across placement attempts
PartitionKey = tuple[str, tuple[str, ...]]


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
    #: compiled partitions shared with the session (a scheduler that compiles
    #: to measure leaves them here so the session does not compile twice)
    compiled: dict[PartitionKey, CompiledPartition] = field(default_factory=dict)
    def backend(self, name: str) -> Backend:
        """The selected (or backup) backend called ``name``."""
        for b in with_backup(self.backends, self.backup):
            if b.name == name:
                return b
        raise ConfigError(f"backend {name!r} is not selected; selected: "
                          + ", ".join(b.name for b in with_backup(self.backends, self.backup)))

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
class PlacementResult:
    """A scheduler's answer: where every node runs, and what it knows about it."""

    assignment: dict[str, str]  #: node name -> backend name
    #: node name -> why the scheduler put it where it is (placement report)
    reasons: dict[str, str] = field(default_factory=dict)
    #: visible decisions (e.g. ``island_merged``) the session adds to its events
    events: list["PlacementEvent"] = field(default_factory=list)
    #: partition -> (estimated seconds per run, source: "measured" | "cost model" | "analytic")
    estimates: dict[PartitionKey, tuple[float, str]] = field(default_factory=dict)
    #: candidate placements a scheduler evaluated, the chosen one first, each a
    #: dict with at least ``label``, ``estimated_ms`` and ``chosen`` (``Session.considered_plans``)
    considered: list[dict[str, Any]] = field(default_factory=list)


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
