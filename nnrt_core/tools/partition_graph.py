"""The partition-level graph of a session: partitions as boxes, boundary tensors as edges.

Built from the public views only (``Session.partitions``,
``placement_report``, ``events`` and ``graph``), so it works as well for a
session loaded from a compiled file, whose graph holds just the inputs and
outputs (intermediate tensor sizes are then unknown, shown as ``?``).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nnrt_core.runtime.memory_plan import value_bytes

if TYPE_CHECKING:
    from nnrt_core.session import Session

__all__ = ["PartitionBox", "BoundaryEdge", "PartitionGraph", "partition_graph", "INPUTS", "OUTPUTS"]

#: keys of the two pseudo boxes that stand for the model's inputs and outputs
INPUTS, OUTPUTS = "inputs", "outputs"


@dataclass
class PartitionBox:
    """One box of the picture: a partition, or the model's inputs / outputs."""

    key: str  #: ``p<index>``, or INPUTS / OUTPUTS
    label: str  #: ``#3`` for a partition, ``inputs`` / ``outputs`` otherwise
    backend: str | None  #: None for the inputs / outputs boxes
    nodes: tuple[str, ...] = ()  #: the partition's nodes (the tensor names for inputs / outputs)
    op_counts: list[tuple[str, int]] = field(default_factory=list)  #: most frequent first
    estimated_ms: float | None = None
    events: list[str] = field(default_factory=list)  #: fallback / warning messages naming its nodes

    @property
    def is_partition(self) -> bool:
        return self.backend is not None


@dataclass
class BoundaryEdge:
    """The tensors one box hands to another."""

    source: str
    target: str
    tensors: list[tuple[str, int | None]]  #: (name, bytes or None when dynamic)

    @property
    def total_bytes(self) -> int | None:
        sizes = [b for _, b in self.tensors]
        return None if any(b is None for b in sizes) else sum(sizes)  # type: ignore[arg-type]


@dataclass
class PartitionGraph:
    """Boxes in execution order (inputs first, outputs last) and the edges between them."""

    boxes: dict[str, PartitionBox]
    edges: list[BoundaryEdge]
    node_count: int
    event_counts: dict[str, int]  #: event kind -> how many
    event_messages: list[str]

    def predecessors(self) -> dict[str, list[str]]:
        """box key -> the keys of the boxes that feed it."""
        preds: dict[str, list[str]] = {k: [] for k in self.boxes}
        for e in self.edges:
            preds[e.target].append(e.source)
        return preds


def _tensor_bytes(sess: "Session") -> dict[str, int | None]:
    return {v.name: value_bytes(v) for v in sess.graph.values()}


def _partition_boxes(sess: "Session") -> dict[str, PartitionBox]:
    op_of = {r.node: r.op_type for r in sess.placement_report}
    events_of: dict[str, list[str]] = {}
    for e in sess.events:
        for n in e.nodes:
            events_of.setdefault(n, []).append(f"{e.kind}: {e.message}")
    boxes = {}
    for p in sess.partitions:
        ops = p.op_types if len(p.op_types) == len(p.nodes) else tuple(op_of.get(n, "?") for n in p.nodes)
        messages = list(dict.fromkeys(m for n in p.nodes for m in events_of.get(n, ())))
        boxes[f"p{p.index}"] = PartitionBox(
            f"p{p.index}", f"#{p.index}", p.backend, tuple(p.nodes),
            sorted(Counter(ops).items(), key=lambda kv: (-kv[1], kv[0])),
            p.details.get("estimated_ms"), messages)
    return boxes


def partition_graph(sess: "Session") -> PartitionGraph:
    """The partition-level graph of ``sess``."""
    sizes = _tensor_bytes(sess)
    graph_inputs = [v.name for v in sess.graph.inputs]
    graph_outputs = [v.name for v in sess.graph.outputs]
    parts = _partition_boxes(sess)
    boxes = {INPUTS: PartitionBox(INPUTS, "inputs", None, tuple(graph_inputs)), **parts,
             OUTPUTS: PartitionBox(OUTPUTS, "outputs", None, tuple(graph_outputs))}
    producer = {t: INPUTS for t in graph_inputs}
    for p in sess.partitions:
        for t in p.outputs:
            producer[t] = f"p{p.index}"
    grouped: dict[tuple[str, str], list[str]] = {}
    for p in sess.partitions:
        for t in p.inputs:
            if t in producer:
                grouped.setdefault((producer[t], f"p{p.index}"), []).append(t)
    for t in graph_outputs:
        if producer.get(t, INPUTS) != INPUTS:  # constants and passed-through inputs have no edge
            grouped.setdefault((producer[t], OUTPUTS), []).append(t)
    edges = [BoundaryEdge(s, d, [(t, sizes.get(t)) for t in dict.fromkeys(ts)]) for (s, d), ts in grouped.items()]
    events = list(sess.events)
    return PartitionGraph(boxes, edges, sum(len(p.nodes) for p in sess.partitions),
                          dict(Counter(e.kind for e in events)), [f"{e.kind}: {e.message}" for e in events])
