"""What a scheduler is given (:class:`PlacementContext`) and what it answers
(:class:`PlacementResult`), and the records of a placement kept by a session."""
from __future__ import annotations

from typing import Any, Mapping

from nnrt_core.backend.base import Backend, Capability, CompiledPartition, CompileOptions
from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import ConfigError
from nnrt_core.ir import Graph, Node
from nnrt_core.record import Record

__all__ = ["PartitionKey", "PlacementContext", "PlacementResult", "NodePlacement", "PlacementEvent", "with_backup"]

#: (backend name, node names in order): identifies a partition across placement attempts
PartitionKey = tuple[str, tuple[str, ...]]


def with_backup(backends: list[Backend], backup: Backend | None) -> list[Backend]:
    """``backends`` in priority order with the backup appended (once)."""
    if backup is None or any(b is backup for b in backends):
        return list(backends)
    return [*backends, backup]


class PlacementContext(Record):
    """Everything a scheduler may use to decide a placement."""

    __slots__ = ("graph", "backends", "backup", "capabilities", "config", "pins", "compiled", "options")
    graph: Graph
    backends: list[Backend]  #: selected available backends, highest priority first
    backup: Backend | None
    capabilities: dict[str, Capability]  #: backend name -> its answer
    config: ScheduleConfig
    pins: Mapping[str, str]
    #: compiled partitions shared with the session (a scheduler that compiles
    #: to measure leaves them here so the session does not compile twice)
    compiled: dict[PartitionKey, CompiledPartition]
    #: backend name -> the options it compiles with (the build's selection computed them once)
    options: Mapping[str, CompileOptions]

    def __init__(self, graph: Graph, backends: list[Backend], backup: Backend | None,
                 capabilities: dict[str, Capability], config: ScheduleConfig, pins: Mapping[str, str] | None = None,
                 compiled: dict[PartitionKey, CompiledPartition] | None = None,
                 options: Mapping[str, CompileOptions] | None = None) -> None:
        self.graph, self.backends, self.backup, self.capabilities, self.config = graph, backends, backup, \
            capabilities, config
        self.pins = {} if pins is None else pins
        self.compiled = {} if compiled is None else compiled
        self.options = {b.name: config.compile_options(b.name) for b in with_backup(backends, backup)} \
            if options is None else options

    def compile_options(self, name: str) -> CompileOptions:
        """The options backend ``name`` compiles (and estimates costs) with."""
        try:
            return self.options[name]
        except KeyError:
            raise ConfigError(f"backend {name!r} is not selected; selected: "
                              + ", ".join(b.name for b in with_backup(self.backends, self.backup))) from None

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

    def first_candidate(self, node: Node) -> Backend | None:
        """``candidates(node)[0]`` (``None`` if there is none), asking no backend
        after the first that claims ``node`` (the backup's answer may be deferred).
        Asked for every node: no list of backends is built."""
        caps, name = self.capabilities, node.name
        for b in self.backends:
            if caps[b.name].supports(name):
                return b
        backup = self.backup
        if backup is not None and all(b is not backup for b in self.backends) and caps[backup.name].supports(name):
            return backup
        return None

    def rejections(self, node: Node) -> dict[str, str]:
        """backend name -> why it rejected ``node`` (for reports and errors)."""
        out = {}
        for name, cap in self.capabilities.items():
            reason = cap.reason(node.name)
            if reason is not None:
                out[name] = reason
        return out


class PlacementResult(Record):
    """A scheduler's answer: where every node runs, and what it knows about it."""

    __slots__ = ("assignment", "reasons", "events", "estimates", "considered")
    assignment: dict[str, str]  #: node name -> backend name
    #: node name -> why the scheduler put it where it is (placement report)
    reasons: dict[str, str]
    #: visible decisions (e.g. ``island_merged``) the session adds to its events
    events: list["PlacementEvent"]
    #: partition -> (estimated seconds per run, source: "measured" | "cost model" | "analytic")
    estimates: dict[PartitionKey, tuple[float, str]]
    #: candidate placements a scheduler evaluated, the chosen one first, each a
    #: dict with at least ``label``, ``estimated_ms`` and ``chosen`` (``Session.considered_plans``)
    considered: list[dict[str, Any]]

    def __init__(self, assignment: dict[str, str], reasons: dict[str, str] | None = None,
                 events: list["PlacementEvent"] | None = None,
                 estimates: dict[PartitionKey, tuple[float, str]] | None = None,
                 considered: list[dict[str, Any]] | None = None) -> None:
        self.assignment = assignment
        self.reasons = {} if reasons is None else reasons
        self.events = [] if events is None else events
        self.estimates = {} if estimates is None else estimates
        self.considered = [] if considered is None else considered


class NodePlacement(Record):
    """Where one node runs and why."""

    __slots__ = ("node", "op_type", "backend", "partition", "reason", "rejected")
    node: str
    op_type: str
    backend: str
    partition: int
    reason: str
    rejected: dict[str, str]  #: backend -> reason

    def __init__(self, node: str, op_type: str, backend: str, partition: int = -1, reason: str = "",
                 rejected: dict[str, str] | None = None) -> None:
        self.node, self.op_type, self.backend, self.partition, self.reason = node, op_type, backend, partition, reason
        self.rejected = {} if rejected is None else rejected

    def to_dict(self) -> dict[str, Any]:
        return self.as_dict()


class PlacementEvent(Record):
    """A visible fallback or warning raised while building a session."""

    __slots__ = ("kind", "backend", "message", "nodes")
    kind: str  #: backend_unavailable | backend_skipped | node_fallback | compile_fallback | option_ignored | reduced_precision ...
    backend: str
    message: str
    nodes: list[str]

    def __init__(self, kind: str, backend: str, message: str, nodes: list[str] | None = None) -> None:
        self.kind, self.backend, self.message = kind, backend, message
        self.nodes = [] if nodes is None else nodes

    def to_dict(self) -> dict[str, Any]:
        return self.as_dict()
