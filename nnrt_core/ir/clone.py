"""Copying parts of a graph into a new graph (partition extraction, passes)."""
from __future__ import annotations

from typing import Iterable, Sequence

from nnrt_core.ir.attributes import Attribute, AttrKind
from nnrt_core.ir.graph import Graph, Node, Value

__all__ = ["clone_value", "clone_node", "clone_graph", "extract_subgraph"]


def clone_value(v: Value, *, as_const: bool = True) -> Value:
    return Value(v.name, v.type, const=v.const if as_const else None, doc=v.doc)


def clone_node(node: Node, value_map: dict[int, Value], parent: Graph) -> Node:
    """Copy ``node`` reading/writing the values mapped by ``value_map``
    (keyed by ``id`` of the original value).  Missing outputs are created and
    added to the map.  Sub-graphs are deep-copied with ``parent`` as their new
    enclosing graph; their outer-scope reads go through ``value_map`` too."""
    inputs = [None if v is None else value_map[id(v)] for v in node.inputs]
    outputs = []
    for v in node.outputs:
        nv = Value(v.name, v.type, doc=v.doc)
        value_map[id(v)] = nv
        outputs.append(nv)
    attrs = [_clone_attr(a, value_map, parent) for a in node.attributes.values()]
    return Node(node.op_type, inputs, outputs, name=node.name, domain=node.domain,
                opset=node.opset, attributes=attrs, doc=node.doc)


def _clone_attr(a: Attribute, value_map: dict[int, Value], parent: Graph) -> Attribute:
    if a.kind == AttrKind.GRAPH:
        return Attribute(a.name, a.kind, _clone_graph(a.value, value_map, parent), a.ref_attr_name)
    if a.kind == AttrKind.GRAPHS:
        return Attribute(a.name, a.kind, [_clone_graph(g, value_map, parent) for g in a.value],
                         a.ref_attr_name)
    return Attribute(a.name, a.kind, a.value, a.ref_attr_name)  # values are immutable by convention


def _clone_graph(g: Graph, value_map: dict[int, Value], parent: Graph) -> Graph:
    new = Graph(g.name, opset_imports=g.opset_imports, parent=parent, doc=g.doc)
    for v in g.inputs:
        nv = clone_value(v, as_const=False)
        value_map[id(v)] = nv
        new.inputs.append(nv)
    for v in g.initializers.values():
        nv = clone_value(v)
        value_map[id(v)] = nv
        new.add_initializer(nv)
    for n in g.nodes:
        new.add_node(clone_node(n, value_map, new))
    new.outputs = [value_map[id(v)] for v in g.outputs]
    return new


def clone_graph(graph: Graph) -> Graph:
    """A structural copy of a top-level graph (constant arrays are shared)."""
    new = _clone_graph(graph, {}, None)
    new.declared_outputs = dict(graph.declared_outputs)
    new.origin = graph.origin
    return new


def extract_subgraph(
    graph: Graph,
    nodes: Iterable[Node],
    inputs: Sequence[Value],
    outputs: Sequence[Value],
    *,
    name: str,
) -> Graph:
    """A new top-level graph running ``nodes`` (in the given order) with the
    given boundary ``inputs`` and ``outputs``.  Initializers the nodes read are
    carried over (sharing their arrays, no copy)."""
    sub = Graph(name, opset_imports=_all_opsets(graph))
    sub.origin = _root(graph).origin
    value_map: dict[int, Value] = {}
    for v in inputs:
        nv = clone_value(v, as_const=False)
        value_map[id(v)] = nv
        sub.inputs.append(nv)
    nodes = list(nodes)
    for n in nodes:
        for v in n.all_inputs():
            if id(v) not in value_map and v.const is not None:
                nv = clone_value(v)
                value_map[id(v)] = nv
                sub.add_initializer(nv)
    for n in nodes:
        sub.add_node(clone_node(n, value_map, sub))
    missing = [v.name for v in outputs if id(v) not in value_map]
    if missing:
        raise KeyError(f"outputs {missing} are not produced inside sub-graph {name!r}")
    sub.outputs = [value_map[id(v)] for v in outputs]
    return sub


def _root(graph: Graph) -> Graph:
    while graph.parent is not None:
        graph = graph.parent
    return graph


def _all_opsets(graph: Graph) -> dict[str, int]:
    return dict(_root(graph).opset_imports)
