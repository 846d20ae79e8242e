"""Turning a node -> backend assignment into partitions.

Partitions are built by a Kahn-style walk of the graph that keeps absorbing
ready nodes of the current backend before switching to another one.  Every
partition is therefore a contiguous run of one topological order, which makes
the partition graph acyclic by construction, and each partition is maximal in
the sense that no ready node of its backend was left out when it was closed.

Nodes with sub-graphs (If/Loop/Scan) are placed as one unit: their bodies are
attributes of the node, never separate nodes, and the values a body reads
from enclosing graphs count as inputs of the node (``Node.all_inputs``), so
their producers are ordered before it and cross partitions as boundary tensors.

:func:`merge_islands` then moves partitions (tiny "islands" or larger
ones) to a neighbouring backend when the partition switch and the transfers
cost more than running them there.
"""
from __future__ import annotations

import heapq
from typing import Callable, Collection, Mapping

from nnrt_core.errors import PlacementError
from nnrt_core.ir import Graph, Node, Value
from nnrt_core.ir.clone import extract_subgraph
from nnrt_core.record import Record

__all__ = ["PartitionPlan", "partition_graph", "whole_graph_view", "IslandMove", "merge_islands",
           "partition_neighbours"]


class PartitionPlan(Record):
    """One partition: a backend and the nodes it runs, in execution order."""

    __slots__ = ("index", "backend", "nodes", "inputs", "outputs")
    index: int
    backend: str
    nodes: list[Node]
    inputs: list[Value]  #: non-constant values read from outside
    outputs: list[Value]  #: values read by later partitions or the caller

    def __init__(self, index: int, backend: str, nodes: list[Node], inputs: list[Value] | None = None,
                 outputs: list[Value] | None = None) -> None:
        self.index, self.backend, self.nodes = index, backend, nodes
        self.inputs = [] if inputs is None else inputs
        self.outputs = [] if outputs is None else outputs

    @property
    def name(self) -> str:
        return f"p{self.index}_{self.backend}"

    def node_names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def to_graph(self, graph: Graph, *, share: bool = False) -> Graph:
        """A self-contained graph of this partition (for ``Backend.compile``).
        With ``share``, a partition that is all of ``graph`` (same inputs and
        outputs, no sub-graphs) is a new :class:`Graph` over ``graph``'s own
        nodes and values (no copy): only for a backend that never mutates
        what it compiles (``Backend.compiles_read_only``)."""
        view = whole_graph_view(graph, self) if share else None
        if view is not None:
            return view
        return extract_subgraph(graph, self.nodes, self.inputs, self.outputs, name=self.name)


def whole_graph_view(graph: Graph, plan: PartitionPlan) -> Graph | None:
    """``plan`` as a graph sharing ``graph``'s nodes and values, or ``None``
    unless it is exactly the whole top-level graph: every node, the graph's
    inputs (none with a default value) and outputs, no sub-graphs; in the
    plan's order, as a copy has them.
    Same name, inputs, outputs, nodes and initializers (the constants the
    nodes read) as :func:`~nnrt_core.ir.clone.extract_subgraph` gives."""
    if (graph.parent is not None or len(plan.nodes) != len(graph.nodes)
            or len(plan.inputs) != len(graph.inputs) or len(plan.outputs) != len(graph.outputs)
            or any(v.const is not None for v in plan.inputs)
            or {id(v) for v in plan.inputs} != {id(v) for v in graph.inputs}
            or {id(v) for v in plan.outputs} != {id(v) for v in graph.outputs}):
        return None
    view = Graph(plan.name, inputs=plan.inputs, outputs=plan.outputs, opset_imports=graph.opset_imports)
    consts = view.initializers
    for n in plan.nodes:
        if n.subgraphs():
            return None
        for v in n.inputs:
            if v is not None and v.const is not None and v.producer is None and consts.get(v.name) is not v:
                view.add_initializer(v)  # GraphError on two constants of one name, as a copy does
    view.nodes = list(plan.nodes)
    return view


def partition_graph(graph: Graph, assignment: Mapping[str, str]) -> list[PartitionPlan]:
    """Group ``graph``'s nodes into acyclic, maximal single-backend partitions.

    ``assignment`` maps every node name to a backend name.
    """
    missing = [n.name for n in graph.nodes if n.name not in assignment]
    if missing:
        raise PlacementError(f"nodes without a backend: {missing[:10]}")
    backends = {assignment[n.name] for n in graph.nodes}
    if len(backends) == 1 and graph.is_topologically_sorted():  # what the walk below gives: one partition
        plans = [PartitionPlan(0, backends.pop(), list(graph.nodes))]
        _connect(graph, plans)
        return plans
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


class IslandMove(Record):
    """One island moved to a neighbouring backend by :func:`merge_islands`."""

    __slots__ = ("nodes", "source", "target", "saved_seconds")
    nodes: list[str]
    source: str
    target: str
    saved_seconds: float  #: estimated latency saved per run

    def __init__(self, nodes: list[str], source: str, target: str, saved_seconds: float) -> None:
        self.nodes, self.source, self.target, self.saved_seconds = nodes, source, target, saved_seconds

    def describe(self) -> str:
        return (f"island of {len(self.nodes)} node(s) {self.nodes} moved from {self.source!r} into the "
                f"neighbouring {self.target!r} partition (saves ~{self.saved_seconds * 1e6:.0f} us per run "
                f"of partition switch and transfers)")


def partition_neighbours(plans: list[PartitionPlan]) -> dict[int, tuple[set[int], set[int]]]:
    """plan index -> (indices of the plans it reads from, indices of the plans reading it)."""
    owner = {id(v): p.index for p in plans for n in p.nodes for v in n.outputs}
    out: dict[int, tuple[set[int], set[int]]] = {p.index: (set(), set()) for p in plans}
    for p in plans:
        for v in p.inputs:
            src = owner.get(id(v))
            if src is not None and src != p.index:
                out[p.index][0].add(src)
                out[src][1].add(p.index)
    return out


def merge_islands(
    graph: Graph,
    assignment: Mapping[str, str],
    *,
    can_run: Callable[[str, str], bool],
    island_seconds: Callable[[list[Node], str], float],
    transfer_seconds: Callable[[Value, str | None, str], float],
    switch_seconds: Callable[[str], float],
    locked: Collection[str] = (),
    max_nodes: int | None = None,
) -> tuple[dict[str, str], list[IslandMove]]:
    """Move partitions ("islands") sandwiched between partitions of another
    backend (it reads an output of one and produces an input of one) to that
    backend when it can run all of their nodes and the cost model says the
    move pays off: the transfers and the partition switch it saves are worth
    more than the run time it adds.  Such a partition whose transfers cost
    more than it saves is thus not made, whatever its size or ops.  Islands
    between host-memory backends, which copy nothing, are left to the
    scheduler's own choice.

    ``can_run(node, backend)`` is the capability answer; ``island_seconds(nodes,
    backend)`` the estimated run time of ``nodes`` on ``backend``;
    ``transfer_seconds(value, src, dst)`` the cost of moving ``value`` from
    backend ``src`` (``None`` = a host feed) to ``dst`` (``""`` = the caller);
    ``switch_seconds(backend)`` the fixed cost of one more partition.  Nodes in
    ``locked`` (pins) never move; ``max_nodes`` (``None``: any size) bounds the
    partitions considered.  The move saving most is made first, and a move is
    kept only when re-partitioning yields fewer partitions, so the loop ends
    and never creates a cycle (``partition_graph`` is acyclic by construction).
    """
    current = dict(assignment)
    moves: list[IslandMove] = []
    plans = partition_graph(graph, current)
    search = _MoveSearch(can_run, island_seconds, transfer_seconds, switch_seconds, set(locked), max_nodes,
                         {id(v) for v in graph.outputs})
    while len(plans) > 1:
        best = search.best(plans)
        if best is None:
            break
        saved, p, target = best
        trial = dict(current)
        for n in p.nodes:
            trial[n.name] = target
        trial_plans = partition_graph(graph, trial)
        if len(trial_plans) < len(plans):
            current, plans = trial, trial_plans
            moves.append(IslandMove(p.node_names(), p.backend, target, saved))
        else:
            search.rejected.add((tuple(p.node_names()), target))
    return current, moves


class _MoveSearch:
    """The most saving move of one partitioning (:meth:`best`), with the
    answers that stay valid across moves cached: whether a backend runs a
    partition's nodes and its run time there."""

    def __init__(self, can_run: Callable[[str, str], bool], island_seconds: Callable[[list[Node], str], float],
                 transfer_seconds: Callable[[Value, str | None, str], float], switch_seconds: Callable[[str], float],
                 locked: set[str], max_nodes: int | None, graph_outputs: set[int]) -> None:
        self.can_run, self.island_seconds = can_run, island_seconds
        self.transfer_seconds, self.switch_seconds = transfer_seconds, switch_seconds
        self.locked, self.max_nodes, self.graph_outputs = locked, max_nodes, graph_outputs
        self.rejected: set[tuple[tuple[str, ...], str]] = set()  #: moves that did not reduce the partitions
        self._runnable: dict[tuple[tuple[str, ...], str], bool] = {}
        self._seconds: dict[tuple[tuple[str, ...], str], float] = {}

    def best(self, plans: list[PartitionPlan]) -> tuple[float, PartitionPlan, str] | None:
        """(seconds saved, partition, target backend) of the best paying move, or ``None``."""
        neighbours = partition_neighbours(plans)
        by_index = {p.index: p for p in plans}
        links = _Links(plans, self.graph_outputs, self.transfer_seconds)
        best: tuple[float, PartitionPlan, str] | None = None
        for p in plans:
            names = tuple(p.node_names())
            if self.max_nodes is not None and len(names) > self.max_nodes or any(n in self.locked for n in names):
                continue
            ins, outs = neighbours[p.index]
            targets = {by_index[i].backend for i in ins} & {by_index[i].backend for i in outs}
            for target in sorted(targets - {p.backend}):
                if (names, target) in self.rejected or not self._runs(names, target):
                    continue
                saved_transfers = links.cost(p, p.backend) - links.cost(p, target)
                if saved_transfers <= 0:
                    continue
                saved = (saved_transfers + self.switch_seconds(p.backend) + self._run_seconds(p, names, p.backend)
                         - self._run_seconds(p, names, target))
                if saved > 0 and (best is None or saved > best[0]):
                    best = (saved, p, target)
        return best

    def _runs(self, names: tuple[str, ...], target: str) -> bool:
        key = (names, target)
        if key not in self._runnable:  # partitions mostly survive a move: ask once
            self._runnable[key] = all(self.can_run(n, target) for n in names)
        return self._runnable[key]

    def _run_seconds(self, p: PartitionPlan, names: tuple[str, ...], backend: str) -> float:
        key = (names, backend)
        if key not in self._seconds:
            self._seconds[key] = self.island_seconds(p.nodes, backend)
        return self._seconds[key]


class _Links:
    """Who produces and who reads each boundary value of a partitioning, to
    price a partition's transfers on a backend (:meth:`cost`)."""

    def __init__(self, plans: list[PartitionPlan], graph_outputs: set[int],
                 transfer_seconds: Callable[[Value, str | None, str], float]) -> None:
        self.owner = {id(v): q.backend for q in plans for v in q.outputs}
        self.readers: dict[int, set[str]] = {}
        for q in plans:
            for v in q.inputs:
                self.readers.setdefault(id(v), set()).add(q.backend)
        self.graph_outputs, self.transfer_seconds = graph_outputs, transfer_seconds

    def cost(self, p: PartitionPlan, backend: str) -> float:
        """Seconds of the copies into and out of ``p`` were it run on ``backend``."""
        total = 0.0
        for v in p.inputs:
            total += self.transfer_seconds(v, self.owner.get(id(v)), backend)
        for v in p.outputs:
            for dst in self.readers.get(id(v), ()):
                total += self.transfer_seconds(v, backend, dst)
            if id(v) in self.graph_outputs:
                total += self.transfer_seconds(v, backend, "")
        return total
