"""The scheduler contract: placing nodes on backends.

A scheduler plugin (entry-point group ``nnrt.schedulers``) provides
:class:`Scheduler` subclasses.  The runtime gathers every candidate backend's
capability answer into a :class:`PlacementContext`; the scheduler returns a
node -> backend assignment; the runtime checks it and partitions the graph
(``Scheduler.partition`` may be overridden for other strategies).

After ``_place`` the base class merges tiny islands (:func:`merge_islands`)
using a :class:`CostModel`: backend cost models where a backend has one
(``Backend.estimate_cost``), an analytic CPU estimate otherwise, and
host<->device transfers as bytes / bandwidth + fixed latency.  Every move is
reported (an ``island_merged`` event and the node's placement reason).
"""
from __future__ import annotations

import abc
import difflib
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

import numpy as np

from nnrt_core.backend.base import Backend, Capability, CompiledPartition, DeviceInfo
from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import ConfigError, PlacementError, UnsupportedNodeError
from nnrt_core.ir import Graph, Node, TensorType, Value
from nnrt_core.partitioning import PartitionPlan, merge_islands, partition_graph

__all__ = [
    "PlacementContext",
    "Scheduler",
    "NodePlacement",
    "PlacementEvent",
    "PartitionKey",
    "CostModel",
    "with_backup",
    "value_nbytes",
    "DEFAULT_POWER_W",
]

#: (backend name, node names in order): identifies a partition across placement attempts
PartitionKey = tuple[str, tuple[str, ...]]

#: active power by device type when a device does not declare ``power_w``
DEFAULT_POWER_W = {"cpu": 15.0, "gpu": 75.0, "npu": 2.0}
#: host<->device link when a device does not declare ``host_bandwidth_gbps``
DEFAULT_HOST_BANDWIDTH_GBPS = 8.0
#: fixed cost of one host<->device copy when a device does not declare ``transfer_latency_us``
DEFAULT_TRANSFER_LATENCY_US = 20.0
#: analytic CPU estimate for backends without a cost model
CPU_MACS_PER_SECOND = 2e10
CPU_BYTES_PER_SECOND = 1e10
NODE_OVERHEAD_SECONDS = 2e-6
PARTITION_OVERHEAD_SECONDS = 20e-6


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
    #: partition -> (estimated seconds per run, source: "measured" | "cost model" | "analytic")
    estimates: dict[PartitionKey, tuple[float, str]] = field(default_factory=dict)
    #: node name -> why the scheduler put it where it is (placement report)
    reasons: dict[str, str] = field(default_factory=dict)
    #: visible decisions (e.g. ``island_merged``) the session adds to its events
    events: list["PlacementEvent"] = field(default_factory=list)
    #: candidate placements a scheduler evaluated, the chosen one first, each a
    #: dict with at least ``label``, ``estimated_ms`` and ``chosen`` (``Session.considered_plans``)
    considered: list[dict[str, Any]] = field(default_factory=list)

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
    #: move tiny islands to a neighbouring backend after ``_place`` (see merge_islands)
    merge_islands: ClassVar[bool] = True
    #: largest partition (in nodes) considered an island
    island_max_nodes: ClassVar[int] = 2

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
        if self.merge_islands:
            assignment = self.merge_small_islands(ctx, assignment, self.cost_model(ctx))
        return assignment

    def estimate_partitions(self, ctx: PlacementContext, plans: list[PartitionPlan],
                            compiled: list[CompiledPartition]) -> dict[int, tuple[float, str]]:
        """plan index -> (estimated seconds per run, source) for reports: what
        the scheduler measured, else the backend's cost model, else the
        analytic estimate.  Never fails (reports must not break a session)."""
        out: dict[int, tuple[float, str]] = {}
        model: CostModel | None = None
        for plan, part in zip(plans, compiled):
            key = (plan.backend, tuple(plan.node_names()))
            try:
                if key in ctx.estimates:
                    out[plan.index] = ctx.estimates[key]
                    continue
                sec = part.estimated_seconds()
                if sec is not None:
                    out[plan.index] = (float(sec), "cost model")
                    continue
                model = model or CostModel(ctx)
                out[plan.index] = (model.nodes_seconds(plan.nodes, plan.backend), "analytic")
            except Exception:  # pragma: no cover - a report value, never fatal
                continue
        return out

    def cost_model(self, ctx: PlacementContext) -> "CostModel":
        """The estimates used for island merging (override to add measurements)."""
        return CostModel(ctx)

    def merge_small_islands(self, ctx: PlacementContext, assignment: dict[str, str],
                            model: "CostModel") -> dict[str, str]:
        """``assignment`` with tiny islands moved where the cost model says it
        pays off; each move is recorded in ``ctx.events`` and ``ctx.reasons``."""
        merged, moves = merge_islands(
            ctx.graph, assignment,
            can_run=lambda node, backend: ctx.capabilities[backend].supports(node),
            island_seconds=model.nodes_seconds,
            transfer_seconds=model.transfer_seconds,
            switch_seconds=model.switch_seconds,
            locked=set(ctx.pins), max_nodes=self.island_max_nodes,
        )
        for m in moves:
            ctx.events.append(PlacementEvent("island_merged", m.target, m.describe(), list(m.nodes)))
            for n in m.nodes:
                ctx.reasons[n] = f"island merged from {m.source!r} into {m.target!r} (saves transfers/switch)"
        return merged

    @abc.abstractmethod
    def _place(self, ctx: PlacementContext) -> dict[str, str]: ...

    def partition(self, graph: Graph, assignment: Mapping[str, str]) -> list[PartitionPlan]:
        return partition_graph(graph, assignment)

    @staticmethod
    def _check_pins(ctx: PlacementContext) -> None:
        names = {n.name for n in ctx.graph.nodes}
        for node, backend in ctx.pins.items():
            if node not in names:
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


def value_nbytes(v: Value) -> int:
    """Bytes of a tensor value from its declared type (unknown dims count as 1;
    non-tensors as 0)."""
    t = v.type
    if not isinstance(t, TensorType) or t.shape is None:
        return 0
    try:
        item = t.dtype.numpy.itemsize
    except TypeError:
        item = 8
    return int(item * math.prod(d if isinstance(d, int) and d > 0 else 1 for d in t.shape))


def _node_macs(node: Node) -> int:
    """Multiply-accumulates of the heavy ops (Conv, Gemm, MatMul) from shapes."""
    if node.op_type not in ("Conv", "ConvTranspose", "Gemm", "MatMul", "QLinearConv", "ConvInteger",
                            "MatMulInteger", "QLinearMatMul") or not node.outputs:
        return 0
    out = node.outputs[0]
    elems = value_nbytes(out) // max(_itemsize(out), 1)
    ins = [v for v in node.inputs if v is not None]
    if node.op_type in ("Conv", "ConvTranspose", "ConvInteger") and len(ins) >= 2:
        w = ins[1].shape
        if w and all(isinstance(d, int) for d in w):
            per = math.prod(w[1:]) if node.op_type != "ConvTranspose" else math.prod(w[2:]) * w[0] // max(
                int(node.attr("group", 1)), 1)
            return int(elems * per)
    if node.op_type == "QLinearConv" and len(ins) >= 4:
        w = ins[3].shape
        if w and all(isinstance(d, int) for d in w):
            return int(elems * math.prod(w[1:]))
    a = ins[0].shape if ins else None
    if a and isinstance(a[-1], int):
        k = a[-1]
        if node.op_type == "Gemm" and node.attr("transA", 0) and len(a) >= 2 and isinstance(a[-2], int):
            k = a[-2]
        return int(elems * k)
    return 0


def _itemsize(v: Value) -> int:
    try:
        return v.type.dtype.numpy.itemsize if isinstance(v.type, TensorType) else 0
    except TypeError:
        return 8


class CostModel:
    """Latency (and energy) estimates used for placement decisions.

    Node costs come from the backend's own cost model when it has one
    (``Backend.estimate_cost``, e.g. the NPU's cycles / clock), else from an
    analytic CPU estimate: max(MACs / CPU rate, bytes / memory bandwidth) +
    per-node overhead.  Transfers between a host-memory backend and a device
    backend cost bytes / link bandwidth + fixed latency, taken from the device's
    ``DeviceInfo.properties`` (``host_bandwidth_gbps``, ``transfer_latency_us``)
    or the module defaults.  Subclasses add measurements.
    """

    def __init__(self, ctx: PlacementContext) -> None:
        self.ctx = ctx
        self._modeled: dict[str, dict[str, float] | None] = {}
        self._devices: dict[str, DeviceInfo | None] = {}
        self._nodes = {n.name: n for n in ctx.graph.nodes}

    # ----------------------------------------------------------- devices
    def device(self, backend: str) -> DeviceInfo | None:
        """The device ``backend`` runs on in this session (None if it cannot say)."""
        if backend not in self._devices:
            try:
                self._devices[backend] = self.ctx.backend(backend).find_device(self.ctx.config.devices.get(backend))
            except Exception:  # a backend that cannot list devices: defaults apply
                self._devices[backend] = None
        return self._devices[backend]

    def _prop(self, backend: str, key: str, default: float) -> float:
        dev = self.device(backend)
        value = dev.properties.get(key) if dev is not None else None
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 \
            else default

    def power_watts(self, backend: str) -> float:
        """Active power of ``backend``'s device: ``properties['power_w']`` or a
        default by device type (``DEFAULT_POWER_W``)."""
        b = self.ctx.backend(backend)
        dev = self.device(backend)
        kind = dev.type if dev is not None else b.device_type
        return self._prop(backend, "power_w", DEFAULT_POWER_W.get(kind, DEFAULT_POWER_W["cpu"]))

    def on_host(self, backend: str | None) -> bool:
        return backend is None or backend == "" or self.ctx.backend(backend).host_memory

    # ------------------------------------------------------------ nodes
    def modeled_seconds(self, backend: str) -> dict[str, float] | None:
        """node -> seconds from ``backend``'s own cost model over the nodes it
        supports, or None when it has no model."""
        if backend not in self._modeled:
            self._modeled[backend] = self._run_cost_model(backend)
        return self._modeled[backend]

    def _run_cost_model(self, backend: str) -> dict[str, float] | None:
        b = self.ctx.backend(backend)
        if type(b)._estimate_cost is Backend._estimate_cost:
            return None
        cap = self.ctx.capabilities[backend]
        split = {n.name: backend if cap.supports(n.name) else "\0other" for n in self.ctx.graph.nodes}
        out: dict[str, float] = {}
        options = self.ctx.config.compile_options(backend)
        for plan in partition_graph(self.ctx.graph, split):
            if plan.backend != backend:
                continue
            est = b.estimate_cost(plan.to_graph(self.ctx.graph), options)
            if est is None:
                return None
            out.update(est)
        return out

    def analytic_seconds(self, node: Node) -> float:
        """CPU estimate from shapes: max(compute, memory) + per-node overhead."""
        moved = sum(value_nbytes(v) for v in node.inputs if v is not None and v.const is None)
        moved += sum(value_nbytes(v) for v in node.outputs)
        return max(_node_macs(node) / CPU_MACS_PER_SECOND, moved / CPU_BYTES_PER_SECOND) + NODE_OVERHEAD_SECONDS

    def node_seconds(self, node: Node, backend: str) -> float:
        modeled = self.modeled_seconds(backend)
        if modeled is not None and node.name in modeled:
            return modeled[node.name]
        return self.analytic_seconds(node)

    def nodes_seconds(self, nodes: list[Node], backend: str) -> float:
        return sum(self.node_seconds(n, backend) for n in nodes)

    def source(self, backend: str) -> str:
        """Where this model's numbers for ``backend`` come from."""
        return "cost model" if self.modeled_seconds(backend) is not None else "analytic"

    # --------------------------------------------------------- transfers
    def copy_seconds(self, nbytes: int, device_backend: str) -> float:
        """One host<->device copy of ``nbytes`` to or from ``device_backend``."""
        gbps = self._prop(device_backend, "host_bandwidth_gbps", DEFAULT_HOST_BANDWIDTH_GBPS)
        lat = self._prop(device_backend, "transfer_latency_us", DEFAULT_TRANSFER_LATENCY_US)
        return nbytes / (gbps * 1e9) + lat * 1e-6

    def transfer_seconds(self, value: Value, src: str | None, dst: str) -> float:
        """Moving ``value`` from backend ``src`` (None = host feed) to ``dst``
        ("" = the caller, on the host): 0 within one backend or between two
        host-memory backends, else one copy per device crossed."""
        if src == dst:
            return 0.0
        nbytes = value_nbytes(value)
        total = 0.0
        if not self.on_host(src):
            total += self.copy_seconds(nbytes, src)  # type: ignore[arg-type]
        if not self.on_host(dst):
            total += self.copy_seconds(nbytes, dst)
        return total

    def switch_seconds(self, backend: str) -> float:
        """Fixed cost of one more partition (dispatch, synchronisation)."""
        return PARTITION_OVERHEAD_SECONDS

    # ------------------------------------------------------------ plans
    def plan_transfer_seconds(self, plans: list[PartitionPlan]) -> float:
        """Copies the executor makes for ``plans``: device -> host once per
        tensor a host partition (or the caller) reads, host -> device per device
        partition reading it."""
        owner = {id(v): p.backend for p in plans for v in p.outputs}
        total = 0.0
        downloaded: set[int] = set()
        for p in plans:
            for v in p.inputs:
                src = owner.get(id(v))
                if src == p.backend:
                    continue
                if src is not None and not self.on_host(src) and id(v) not in downloaded:
                    total += self.copy_seconds(value_nbytes(v), src)
                    downloaded.add(id(v))
                if not self.on_host(p.backend):
                    total += self.copy_seconds(value_nbytes(v), p.backend)
        for v in self.ctx.graph.outputs:
            src = owner.get(id(v))
            if src is not None and not self.on_host(src) and id(v) not in downloaded:
                total += self.copy_seconds(value_nbytes(v), src)
        return total
