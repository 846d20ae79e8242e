"""Graph edits shared by the passes.

:class:`GraphEditor` wraps one graph for the length of one pass run.  It
knows which values are graph outputs and which are read by sub-graphs (outer
scope), so passes can ask "is this value read only by that node?" and
rewire or remove nodes while keeping graph-output names and outer-scope reads
intact.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from nnrt_core.ir import Graph, Node, TensorType, Value

__all__ = ["GraphEditor", "is_constant", "static_shape", "clip_bounds"]


def is_constant(v: Value | None) -> bool:
    """An initializer (data known, no producer)."""
    return v is not None and v.const is not None and v.producer is None


def clip_bounds(clip: Node, legacy: tuple[float, float] = (-np.inf, np.inf)) -> tuple[float, float] | None:
    """(lo, hi) of a Clip: its ``min`` / ``max`` attributes before opset 11
    (``legacy``: their defaults), else its constant (or absent: +-inf) bound
    inputs; ``None`` when a bound input is not a one-value constant."""
    if (clip.opset or 1) < 11:
        return float(clip.attr("min", legacy[0])), float(clip.attr("max", legacy[1]))
    bounds = []
    for i, default in ((1, -np.inf), (2, np.inf)):
        v = clip.inputs[i] if len(clip.inputs) > i else None
        if v is None:
            bounds.append(default)
        elif is_constant(v) and v.const.size == 1:  # type: ignore[union-attr]
            bounds.append(float(np.asarray(v.const).reshape(())))
        else:
            return None
    return bounds[0], bounds[1]


def static_shape(v: Value | None) -> tuple[int, ...] | None:
    """The fully static shape of a tensor value, else ``None``."""
    if v is None:
        return None
    if v.const is not None:
        return tuple(v.const.shape)
    t = v.type
    if isinstance(t, TensorType) and t.is_static:
        return tuple(int(d) for d in t.shape)  # type: ignore[union-attr]
    return None


class GraphEditor:
    """Use-def queries and safe edits on one graph (see module docstring)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.outputs = {id(v) for v in graph.outputs}
        self.subgraph_reads: set[int] = set()
        for n in graph.nodes if graph.has_subgraphs() else ():  # every pass makes an editor: one cheap test
            if n.subgraphs():
                self.subgraph_reads.update(id(v) for v in n.outer_inputs())
        self._names: set[str] | None = None

    # -- queries ----------------------------------------------------------
    def is_output(self, v: Value) -> bool:
        return id(v) in self.outputs

    def readers(self, v: Value) -> list[Node]:
        """Nodes of this graph reading ``v`` explicitly."""
        return [n for n in v.consumers() if n.graph is self.graph]

    def is_read(self, v: Value) -> bool:
        return bool(v.uses) or id(v) in self.outputs or id(v) in self.subgraph_reads

    def sole_reader(self, v: Value) -> Node | None:
        """The one node reading ``v`` (once), when nothing else (graph output,
        sub-graph, second input slot) reads it."""
        if id(v) in self.outputs or id(v) in self.subgraph_reads or len(v.uses) != 1:
            return None
        node = v.uses[0][0]
        return node if node.graph is self.graph else None

    def fresh_name(self, base: str) -> str:
        """A value or node name no value or node of the model uses yet."""
        if self._names is None:
            root: Graph = self.graph
            while root.parent is not None:
                root = root.parent
            names: set[str] = set()
            for g in _graphs(root):
                names.update(v.name for v in g.values())
                names.update(g.initializers)
                names.update(n.name for n in g.nodes)
            self._names = names
        name, k = base, 1
        while name in self._names:
            name, k = f"{base}_{k}", k + 1
        self._names.add(name)
        return name

    # -- edits ------------------------------------------------------------
    def add_constant(self, base: str, data: np.ndarray) -> Value:
        """A new initializer named after ``base``."""
        v = Value(self.fresh_name(base), const=np.ascontiguousarray(data))
        self.graph.add_initializer(v)
        return v

    def replace_uses(self, old: Value, new: Value) -> None:
        """Make every node reading ``old`` (sub-graph nodes and sub-graph
        outputs included) read ``new``.  ``old`` must not be a graph output."""
        assert id(old) not in self.outputs, "graph outputs keep their names; use bypass()"
        for node, i in list(old.uses):
            (node.graph or self.graph).set_input(node, i, new)
        if id(old) in self.subgraph_reads:
            for n in self.graph.nodes:
                for sub in n.subgraphs():
                    for g in _graphs(sub):
                        g.outputs = [new if v is old else v for v in g.outputs]
            self.subgraph_reads.add(id(new))

    def detach(self, node: Node) -> None:
        """Remove ``node`` whatever reads its outputs (the caller rewires them).
        The outer values its sub-graphs read lose those readers too."""
        g = self.graph
        for i, v in enumerate(node.inputs):
            if v is not None:
                v.uses = [(n, j) for n, j in v.uses if not (n is node and j == i)]
        subs = node.subgraphs()
        if subs:
            inner = {id(n) for sub in subs for n in sub.walk()}
            for v in node.outer_inputs():
                v.uses = [(n, j) for n, j in v.uses if id(n) not in inner]
        for v in node.outputs:
            if v.producer is node:
                v.producer, v.output_index = None, -1
        g.nodes.remove(node)
        node.graph = None

    def adopt_output(self, node: Node, index: int, value: Value) -> None:
        """Make ``node`` write ``value`` as its output ``index`` (``value``'s
        previous producer must already be detached)."""
        old = node.outputs[index]
        if old.producer is node:
            old.producer, old.output_index = None, -1
        node.outputs[index] = value
        value.producer, value.output_index = node, index

    def bypass(self, node: Node, out: Value, src: Value) -> bool:
        """Remove ``node``, whose output ``out`` equals its input ``src``.

        Readers of ``out`` read ``src`` instead.  When ``out`` is a graph
        output its name must survive, so ``src``'s producer writes ``out``
        directly; that needs ``src`` to be a node output nothing else reads.
        Returns False (and changes nothing) when that is impossible.
        """
        others = [v for v in node.outputs if v is not out and v.name]
        if any(self.is_read(v) for v in others):
            return False
        if id(out) not in self.outputs:
            self.replace_uses(out, src)
            self.detach(node)
            return True
        producer = src.producer
        if producer is None or producer.graph is not self.graph or self.sole_reader(src) is not node:
            return False
        if out.type is None:
            out.type = src.type
        self.detach(node)
        self.adopt_output(producer, src.output_index, out)
        return True

    def drop_unread_initializers(self) -> int:
        """Delete initializers nothing reads (:meth:`is_read`: the use-def
        links the graph keeps, graph outputs, sub-graph reads); returns how many."""
        inits = self.graph.initializers
        unread = [name for name, v in inits.items() if not self.is_read(v)]
        for name in unread:
            del inits[name]
        return len(unread)


def _graphs(g: Graph) -> Iterable[Graph]:
    yield g
    for n in g.nodes:
        for sub in n.subgraphs():
            yield from _graphs(sub)
