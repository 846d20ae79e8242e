"""What a build produces: :class:`CompiledModel` (the value the cache and
offline files store and load), :class:`PartitionInfo` (a partition as users see
it) and :class:`EventLog` (visible fallbacks and warnings of a build)."""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from nnrt_core.backend.base import Backend, CompiledPartition, describe_partition
from nnrt_core.config import ScheduleConfig
from nnrt_core.ir import Graph
from nnrt_core.logs import WARNING, get_logger
from nnrt_core.passes.report import PassReport
from nnrt_core.placement.context import NodePlacement, PlacementEvent
from nnrt_core.record import FrozenRecord
from nnrt_core.runtime.executor import ExecutionStep
from nnrt_core.compiler.memory_plans import MemoryPlans
from nnrt_core.storage.weights import SharingReport

if TYPE_CHECKING:  # the scheduler that placed a build (a loaded session file has none)
    from nnrt_core.placement.scheduler import Scheduler

__all__ = ["CompiledModel", "EventLog", "PartitionInfo"]

#: report fields a build may hand over as callables (see ``CompiledModel.__getattr__``)
_DEFERRED = ("placement", "estimates")

log = get_logger("nnrt.session")


class EventLog(list[PlacementEvent]):
    """The visible events of a build: every fallback and skipped option is
    logged as a warning and kept for the placement report."""

    def add(self, kind: str, backend: str, message: str, nodes: Sequence[str] = (), *,
            level: int = WARNING) -> None:
        self.append(PlacementEvent(kind, backend, message, list(nodes)))
        log.log(level, "%s", message)


class HeldEventLog(EventLog):
    """The events of a candidate plan being measured: kept, logged only by
    :meth:`release` (the plan chosen; nnrt_core/compiler/measure_choice.py),
    so a plan not chosen does not warn as if its events were the session's."""

    def __init__(self) -> None:
        super().__init__()
        self.levels: list[int] = []
        self.released = False

    def add(self, kind: str, backend: str, message: str, nodes: Sequence[str] = (), *,
            level: int = WARNING) -> None:
        self.append(PlacementEvent(kind, backend, message, list(nodes)))
        self.levels.append(level)
        if self.released:  # the plan chosen: later events (at run time) are logged as they come
            log.log(level, "%s", message)

    def _levels(self) -> list[int]:  # an event appended without add() counts as a warning
        return self.levels + [WARNING] * (len(self) - len(self.levels))

    def warnings(self) -> list[str]:
        """The messages of the events added at WARNING or above."""
        return [e.message for e, lvl in zip(self, self._levels()) if lvl >= WARNING]

    def release(self) -> None:
        """Log the events held (once)."""
        if not self.released:
            self.released = True
            for e, lvl in zip(self, self._levels()):
                log.log(lvl, "%s", e.message)


class PartitionInfo(FrozenRecord):
    """One compiled partition as the user sees it."""

    __slots__ = ("index", "backend", "nodes", "op_types", "inputs", "outputs", "details")
    index: int
    backend: str
    nodes: tuple[str, ...]
    op_types: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    details: Mapping[str, Any]

    def __init__(self, index: int, backend: str, nodes: tuple[str, ...], op_types: tuple[str, ...],
                 inputs: tuple[str, ...], outputs: tuple[str, ...], details: Mapping[str, Any]) -> None:
        for k, v in (("index", index), ("backend", backend), ("nodes", nodes), ("op_types", op_types),
                     ("inputs", inputs), ("outputs", outputs), ("details", details)):
            object.__setattr__(self, k, v)

    def to_dict(self) -> dict[str, Any]:
        d = self.as_dict()
        for k in ("nodes", "op_types", "inputs", "outputs"):
            d[k] = list(d[k])
        d["details"] = dict(self.details)
        return d


class CompiledModel:
    """A model placed, partitioned and compiled across backends.

    Built by :func:`nnrt_core.compiler.compile_model` from a source model, or
    loaded from a session file / cache entry (then ``graph`` holds only the
    inputs and outputs, and ``scheduler`` is ``None``).

    Fields (keyword arguments of the constructor, all stored as attributes):
    ``config``, ``graph``; ``steps`` (compiled partitions in execution order,
    with their backends and boundaries); ``partitions`` (one
    :class:`PartitionInfo` per step, ``details`` empty: :meth:`partition_infos`
    fills them); ``placement`` (where every node runs and why) and
    ``estimates`` (partition -> (seconds, source)), each a value or a callable
    called when first read; ``events``; ``constants`` (graph outputs that are
    constants); ``backends`` (selected, or when loaded used, backends);
    ``backup``; ``scheduler``; ``considered_plans``; ``pass_report``;
    ``folded_nodes``; ``weight_sharing``; ``stored_memory_stats`` (figures read
    from a session file); ``cache_hit``; ``cache_path``; ``build_times``
    (stage -> seconds, :mod:`nnrt_core.compiler.timing`)."""

    def __init__(self, config: ScheduleConfig, graph: Graph, steps: list[ExecutionStep],
                 partitions: list[PartitionInfo], placement: list[NodePlacement] | Callable[[], list[NodePlacement]],
                 events: EventLog, constants: dict[str, np.ndarray] | None = None,
                 backends: list[Backend] | None = None, backup: Backend | None = None,
                 scheduler: Scheduler | None = None,
                 estimates: dict[int, tuple[float, str]] | Callable[[], dict[int, tuple[float, str]]] | None = None,
                 considered_plans: list[dict[str, Any]] | None = None, pass_report: PassReport | None = None,
                 folded_nodes: int = 0, weight_sharing: SharingReport | None = None,
                 stored_memory_stats: dict[str, Any] | None = None, cache_hit: bool = False,
                 cache_path: str | None = None, build_times: dict[str, float] | None = None) -> None:
        self.config, self.graph, self.steps, self.partitions = config, graph, steps, partitions
        self.placement, self.events, self.backup, self.scheduler = placement, events, backup, scheduler
        self.constants = {} if constants is None else constants
        self.backends = [] if backends is None else backends
        self.estimates = {} if estimates is None else estimates
        self.considered_plans = [] if considered_plans is None else considered_plans
        self.pass_report = PassReport("none") if pass_report is None else pass_report
        self.folded_nodes, self.stored_memory_stats = folded_nodes, stored_memory_stats
        self.weight_sharing = SharingReport() if weight_sharing is None else weight_sharing
        self.cache_hit, self.cache_path = cache_hit, cache_path
        self.build_times = {} if build_times is None else build_times
        #: the source model and registry a run's overflow fallback rebuilds from (``compile_model``
        #: sets them when ``config.on_overflow`` is "fallback"; see nnrt_core.compiler.overflow)
        self.source: Any = None
        self.registry: Any = None
        #: partition index -> its nodes compiled for the backup, read from a session file (format 3): what a
        #: loaded model's overflow fallback runs instead (nnrt_core.compiler.stored_fallback)
        self.stored_fallbacks: dict[int, Any] = {}
        #: the memory plans of ``graph``'s intermediates (stored figures for a loaded model)
        self.memory_plans = MemoryPlans(self.graph, self.stored_memory_stats)
        self._deferred: dict[str, Callable[[], Any]] = {}
        self._deferred_lock = threading.Lock()
        for name in _DEFERRED:
            if callable(self.__dict__[name]):  # a report nobody may read: computed on first access
                self._deferred[name] = self.__dict__.pop(name)

    def __getattr__(self, name: str) -> Any:
        """A deferred report field (``placement``, ``estimates``), computed once when first read."""
        deferred = self.__dict__.get("_deferred")
        if not deferred or name not in _DEFERRED:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        with self.__dict__["_deferred_lock"]:
            if name in self.__dict__:  # another thread computed it
                return self.__dict__[name]
            value = self.__dict__[name] = deferred[name]()
            del deferred[name]
        return value

    @property
    def compiled(self) -> list[CompiledPartition]:
        return [st.compiled for st in self.steps]

    def partition_infos(self) -> list[PartitionInfo]:
        """The partitions with each backend's ``describe()`` and the cost estimate."""
        out = []
        for info, step in zip(self.partitions, self.steps):
            details = describe_partition(step.compiled)
            est = self.estimates.get(info.index)
            if est is not None:  # estimated cost of one run (see nnrt_core.placement.CostModel)
                details = {**details, "estimated_ms": est[0] * 1e3, "estimate_source": est[1]}
            out.append(PartitionInfo(info.index, info.backend, info.nodes, info.op_types, info.inputs,
                                     info.outputs, details))
        return out
