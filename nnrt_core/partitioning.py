"""Turning a node -> backend assignment into partitions.

Partitions are built by a Kahn-style walk of the graph that keeps absorbing
ready nodes of the current backend before switching to another one.  Every
partition is therefore a contiguous run of one topological order, which makes
the partition graph acyclic by construction, and each partition is maximal in
the sense that no ready node of its backend was left out when it was closed.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Mapping

from nnrt_core.errors import PlacementError
from nnrt_core.ir import Graph, Node, Value
from nnrt_core.ir.clone import extract_subgraph

__all__ = ["PartitionPlan", "partition_graph"]


@dataclass
class PartitionPlan:
    """One partition: a backend and the nodes it runs, in execution order."""

    index: int
    backend: str
    nodes: list[Node]
    inputs: list[Value] = field(default_factory=list)  #: non-constant values read from outside
    outputs: list[Value] = field(default_factory=list)  #: values read by later partitions or the caller

    @property
    def name(self) -> str:
        return f"p{self.index}_{self.backend}"

    def node_names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def to_graph(self, graph: Graph) -> Graph:
        """A self-contained graph of this partition (for ``Backend.compile``)."""
        return extract_subgraph(graph, self.nodes, self.inputs, self.outputs, name=self.name)


def partition_graph(graph: Graph, assignment: Mapping[str, str]) -> list[PartitionPlan]:
    """Group ``graph``'s nodes into acyclic, maximal single-backend partitions.

    ``assignment`` maps every node name to a backend name.
    """
    missing = [n.name for n in graph.nodes if n.name not in assignment]
    if missing:
        raise PlacementError(f"nodes without a backend: {missing[:10]}")
    order = {id(n): i for i, n in enumerate(graph.nodes)}
    deps: dict[int, int] = {}
    users: dict[int, list[Node]] = {id(n): [] for n in graph.nodes}
    for n in graph.nodes:
        producers = {id(v.producer) for v in n.all_inputs() if v.producer is not None and id(v.producer) in order}
        producers.discard(id(n))
        deps[id(n)] = len(producers)
        for p in producers:
            users[p].append(n)

    ready: dict[str, list[tuple[int, int, Node]]] = {}

    def push(n: Node) -> None:
        heapq.heappush(ready.setdefault(assignment[n.name], []), (order[id(n)], id(n), n))

    for n in graph.nodes:
        if deps[id(n)] == 0:
            push(n)

    plans: list[PartitionPlan] = []
    placed = 0
    while placed < len(graph.nodes):
        candidates = [(heap[0][0], b) for b, heap in ready.items() if heap]
        if not candidates:
            raise PlacementError(f"graph {graph.name!r} has a cycle; cannot partition it")
        _, backend = min(candidates)
        plan = PartitionPlan(len(plans), backend, [])
        heap = ready[backend]
        while heap:
            _, _, n = heapq.heappop(heap)
            plan.nodes.append(n)
            placed += 1
            for u in users[id(n)]:
                deps[id(u)] -= 1
                if deps[id(u)] == 0:
                    push(u)
        plans.append(plan)
    _connect(graph, plans)
    return plans


def _connect(graph: Graph, plans: list[PartitionPlan]) -> None:
    """Fill in each plan's boundary inputs and outputs."""
    owner: dict[int, int] = {}
    for p in plans:
        for n in p.nodes:
            for v in n.outputs:
                owner[id(v)] = p.index
    graph_outputs = {id(v) for v in graph.outputs}
    exported: dict[int, dict[int, Value]] = {p.index: {} for p in plans}
    for p in plans:
        seen: dict[int, Value] = {}
        for n in p.nodes:
            for v in n.all_inputs():
                if v.const is not None and v.producer is None:
                    continue  # initializers travel with the partition
                src = owner.get(id(v))
                if src == p.index:
                    continue
                seen.setdefault(id(v), v)
                if src is not None:
                    exported[src].setdefault(id(v), v)
        p.inputs = list(seen.values())
    for p in plans:
        outs = dict(exported[p.index])
        for n in p.nodes:
            for v in n.outputs:
                if id(v) in graph_outputs:
                    outs.setdefault(id(v), v)
        # keep node order for readability
        pos = {id(v): (i, j) for i, n in enumerate(p.nodes) for j, v in enumerate(n.outputs)}
        p.outputs = sorted(outs.values(), key=lambda v: pos[id(v)])
