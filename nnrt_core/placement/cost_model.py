"""Latency and energy estimates for placement: backend cost models where a
backend has one (``Backend.estimate_cost``), an analytic CPU estimate
otherwise, and host<->device transfers as bytes / bandwidth + fixed latency."""
from __future__ import annotations

import math

from nnrt_core.backend.base import DeviceInfo
from nnrt_core.ir import Node, TensorType, Value
from nnrt_core.placement.context import PlacementContext
from nnrt_core.placement.partitioning import PartitionPlan, partition_graph

__all__ = ["CostModel", "value_nbytes", "link_copy_seconds", "DEFAULT_POWER_W", "DEFAULT_HOST_BANDWIDTH_GBPS",
           "DEFAULT_TRANSFER_LATENCY_US", "PARTITION_OVERHEAD_SECONDS"]

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


def _positive(props: dict, key: str, default: float) -> float:
    value = props.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 \
        else default


def link_copy_seconds(nbytes: int, device: DeviceInfo | None) -> float:
    """Modelled time of one host<->device copy of ``nbytes`` over ``device``'s
    link: bytes / ``host_bandwidth_gbps`` + ``transfer_latency_us`` from its
    properties (module defaults where it declares none)."""
    props = device.properties if device is not None else {}
    gbps = _positive(props, "host_bandwidth_gbps", DEFAULT_HOST_BANDWIDTH_GBPS)
    latency_us = _positive(props, "transfer_latency_us", DEFAULT_TRANSFER_LATENCY_US)
    return nbytes / (gbps * 1e9) + latency_us * 1e-6


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
    shape = t.shape
    if all(type(d) is int and d > 0 for d in shape):  # the common static case: no per-dim substitution
        return item * math.prod(shape)
    return int(item * math.prod(d if isinstance(d, int) and d > 0 else 1 for d in shape))


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
        return _positive(dev.properties, key, default) if dev is not None else default

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
        if not b.has_cost_model:
            return None
        cap = self.ctx.capabilities[backend]
        split = {n.name: backend if cap.supports(n.name) else "\0other" for n in self.ctx.graph.nodes}
        out: dict[str, float] = {}
        options = self.ctx.compile_options(backend)
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
        """One host<->device copy of ``nbytes`` to or from ``device_backend``
        (:func:`link_copy_seconds` over its device)."""
        return link_copy_seconds(nbytes, self.device(device_backend))

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
