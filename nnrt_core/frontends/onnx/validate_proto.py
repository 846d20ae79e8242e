""":func:`validate_model`: the node checks of :mod:`~nnrt_core.frontends.onnx.validate`
on a ``ModelProto``, in one or two walks.

The load path checks a model twice: the structure (arity, attributes, the
op rules) before onnx's native shape inference may see it, and the input
element types once inference has typed every value.  Shape inference adds
types, never nodes, so the first walk can keep what it read of each node
(:class:`NodeWalk`: op, domain, opset, input names, output count) and the
second reads only the types from the inferred model, without walking its
nodes' protos again.  Models with sub-graphs are walked in full both times
(their inner types live in the sub-graphs' own ``value_info``).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, NamedTuple

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends.onnx.node_facts import PASSED, proto_facts_key, remember
from nnrt_core.frontends.onnx.onnx_api import P
from nnrt_core.frontends.onnx.proto_build import get_attribute_value
from nnrt_core.frontends.onnx.validate import NOT_TENSOR, NodeView, elem_name, validate_node

__all__ = ["NodeWalk", "validate_model"]

AttributeProto = P.AttributeProto
_GRAPH_KINDS = (AttributeProto.GRAPH, AttributeProto.GRAPHS)
_SEQUENCE_KINDS = ("sequence_type", "map_type", "optional_type")


class NodeWalk(NamedTuple):
    """What a structure walk read of a graph without sub-graphs, node by
    node: ``(op_type, domain, opset, input names, output count)``."""

    nodes: list[tuple[str, str, int | None, tuple[str, ...], int]]


def _proto_types(g: P.GraphProto, types: dict[str, int], subgraphs: bool = True) -> dict[str, int]:
    """Tensor element types ``g`` (and, with ``subgraphs``, its sub-graphs)
    declare, by value name (``NOT_TENSOR`` for sequences, maps and
    optionals); an unknown element type is a :class:`ModelLoadError`."""
    for vis in (g.input, g.value_info, g.output):
        for vi in vis:
            tp = vi.type
            elem = tp.tensor_type.elem_type  # 0 unless the type is a tensor (another oneof case reads as unset)
            if elem:
                if elem_name(elem) is None:
                    raise ModelLoadError(f"graph {g.name!r}: value {vi.name!r} has unknown element type {elem}")
                types.setdefault(vi.name, elem)
            elif tp.WhichOneof("value") in _SEQUENCE_KINDS:
                types.setdefault(vi.name, NOT_TENSOR)
    for t in g.initializer:
        types[t.name] = t.data_type
    if subgraphs:
        for p in g.node:
            for a in p.attribute:
                if a.type in _GRAPH_KINDS:
                    for sub in ([a.g] if a.type == AttributeProto.GRAPH else a.graphs):
                        _proto_types(sub, types)
    return types


#: attribute type -> its value as the checks read it (``NodeView.attrs``), read directly (lists as tuples:
#: the values are part of the node's facts key)
_READ: dict[int, Callable[[P.AttributeProto], Any]] = {
    AttributeProto.INT: lambda a: a.i,
    AttributeProto.INTS: lambda a: tuple(a.ints),
    AttributeProto.TENSOR: lambda a: math.prod(a.t.dims),
    AttributeProto.STRING: lambda a: a.s.decode("utf-8", "replace"),
    AttributeProto.STRINGS: lambda a: tuple(s.decode("utf-8", "replace") for s in a.strings),
    AttributeProto.FLOATS: lambda a: tuple(a.floats),
}
_LIST_KINDS = frozenset({AttributeProto.INTS, AttributeProto.STRINGS, AttributeProto.FLOATS})


def _proto_attrs(p: P.NodeProto, structure: bool) -> tuple[tuple[tuple[str, int, Any], ...], list[P.GraphProto]]:
    """``(name, type, value)`` of each attribute of ``p`` as ``NodeView.attrs``
    reads it (graph attributes only when not ``structure``), and its sub-graphs."""
    items: list[tuple[str, int, Any]] = []
    graphs: list[P.GraphProto] = []
    for a in p.attribute:
        kind = a.type
        if kind in _GRAPH_KINDS:
            graphs += [a.g] if kind == AttributeProto.GRAPH else list(a.graphs)
            items.append((a.name, kind, None))
        elif not structure:
            continue  # attribute values are read for the structure checks only
        elif kind in _READ:
            if a.ref_attr_name and kind != AttributeProto.TENSOR:
                get_attribute_value(a)  # raises, as before, for a reference outside a function
            items.append((a.name, kind, _READ[kind](a)))
        else:
            items.append((a.name, kind, None))
    return tuple(items), graphs


def _view_attrs(items: tuple[tuple[str, int, Any], ...]) -> dict[str, tuple[int, Any]]:
    """``NodeView.attrs`` of the ``(name, type, value)`` triples (lists as lists)."""
    return {name: (kind, list(value) if kind in _LIST_KINDS else value) for name, kind, value in items}


def _check(nodes: Any, k: int, op: str, domain: str, version: int | None, items: tuple, inputs: tuple[str, ...],
           n_outputs: int, in_types: tuple, opsets: Mapping[str, int], structure: bool) -> None:
    """Validate node ``nodes[k]`` (read as its facts say) unless its facts
    passed before (the ``NodeView`` only then)."""
    key = proto_facts_key(op, domain, version, items, in_types, tuple(map(bool, inputs)), n_outputs, structure)
    if key not in PASSED:
        p = nodes[k]
        view = NodeView(f"node {p.name or f'#{k}'!r} ({op})", op, domain, list(inputs), list(p.output),
                        _view_attrs(items), list(in_types))
        validate_node(view, opsets, structure=structure)
        remember(key)


def _validate_proto_graph(g: P.GraphProto, opsets: Mapping[str, int], types: Mapping[str, int] | None,
                          structure: bool = True, walk: list | None = None) -> bool:
    """Check the nodes of ``g``, each set of facts once (:mod:`~nnrt_core.frontends.onnx.node_facts`);
    ``walk`` collects what was read of each node.  True when ``g`` has sub-graphs."""
    nested = False
    for k, p in enumerate(g.node):
        inputs = tuple(p.input)
        has_attrs = len(p.attribute) > 0
        if not structure and not inputs and not (has_attrs and any(a.type in _GRAPH_KINDS for a in p.attribute)):
            continue  # the type checks read inputs only (Constant nodes: half of some models)
        items, graphs = _proto_attrs(p, structure) if has_attrs else ((), ())
        op, domain = p.op_type, p.domain
        if op.__class__ is not str or domain.__class__ is not str or p.name.__class__ is not str or \
                not all(v.__class__ is str for v in (*inputs, *p.output)):
            _not_text(p, k)
        version = opsets.get("" if domain == "ai.onnx" else domain)
        n_outputs = len(p.output)
        _check(g.node, k, op, domain, version, items, inputs, n_outputs,
               tuple(map(types.get, inputs)) if types is not None else (), opsets, structure)
        if walk is not None:
            walk.append((op, domain, version, inputs, n_outputs))
        for sub in graphs:
            nested = True
            _validate_proto_graph(sub, opsets, types, structure)
    return nested


def _not_text(p: P.NodeProto, k: int) -> None:
    """A node whose op_type, domain, name or value names are not valid UTF-8
    (protobuf hands those string fields over as ``bytes``; the checker lets
    them pass outside the default domain)."""
    fields = [("op_type", p.op_type), ("domain", p.domain), ("name", p.name),
              *((f"input {i}", v) for i, v in enumerate(p.input)), *((f"output {i}", v) for i, v in enumerate(p.output))]
    what, value = next((f, v) for f, v in fields if v.__class__ is not str)
    raise ModelLoadError(f"node #{k}: its {what} {value!r} is not valid UTF-8 text")


def validate_model(proto: P.ModelProto, *, types: bool = False, structure: bool = True,
                   walk: NodeWalk | None = None) -> NodeWalk | None:
    """Check every node of ``proto``'s graph (sub-graphs included; local
    functions must be inlined first); :class:`ModelLoadError` for the first
    violation.  With ``types`` the element types the graphs declare (after
    shape inference: every value's) are checked against the schemas' type
    constraints too; ``structure=False`` (with ``types``) checks only those,
    for a model whose structure was validated before shape inference.

    A structure check returns a :class:`NodeWalk` (``None`` for a model with
    sub-graphs); a types-only check given one (``walk``, from a model with
    the same nodes: the same model before shape inference) reads only the
    types of ``proto``, not its nodes again."""
    opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in proto.opset_import}
    structure = structure or not types
    if walk is not None and not structure and len(walk.nodes) == len(proto.graph.node):
        declared = _proto_types(proto.graph, {}, subgraphs=False)
        nodes = proto.graph.node
        for k, (op, domain, version, inputs, n_outputs) in enumerate(walk.nodes):
            if inputs:
                _check(nodes, k, op, domain, version, (), inputs, n_outputs, tuple(map(declared.get, inputs)),
                       opsets, False)
        return None
    read: list | None = [] if structure else None
    nested = _validate_proto_graph(proto.graph, opsets, _proto_types(proto.graph, {}) if types else None,
                                   structure, read)
    return NodeWalk(read) if read is not None and not nested else None
