"""nnrt IR -> ONNX protos (used by the ONNX Runtime delegate, by shape
inference and by ``nnrt`` commands that write models)."""
from __future__ import annotations

from typing import Any

import numpy as np
from nnrt_core.errors import GraphError
from nnrt_core.frontends.onnx import proto_build as helper
from nnrt_core.frontends.onnx.external_weights import ExternalWeights
from nnrt_core.frontends.onnx.onnx_api import P
from nnrt_core.ir import (
    Attribute,
    AttrKind,
    Graph,
    Model,
    OptionalType,
    SequenceType,
    TensorType,
    Value,
    ValueType,
)

__all__ = ["ExternalWeights", "array_to_tensor", "attribute_to_proto", "graph_to_onnx", "to_onnx", "type_to_proto",
           "value_info"]


def to_onnx(model: Model | Graph, *, ir_version: int | None = None,
            external: ExternalWeights | None = None) -> P.ModelProto:
    """Export a model (or a bare graph with its ``opset_imports``) to ONNX.

    ``ir_version`` caps the written IR version (e.g. the highest one the
    installed onnxruntime accepts); with ``external`` the main graph's large
    initializers are left out as external-data references it collects."""
    graph = model.graph if isinstance(model, Model) else model
    opsets = dict(graph.opset_imports) or {"": 13}
    if "" not in opsets and "ai.onnx" in opsets:
        opsets[""] = opsets.pop("ai.onnx")
    # a partition may use domains its parent declared: make sure every node's domain is imported
    for node in graph.walk():
        if node.domain not in opsets:
            opsets[node.domain] = node.opset or 1
    proto = P.ModelProto(ir_version=P.IR_VERSION)  # helper.make_model, with the graph written in place
    _fill_graph(proto.graph, graph, external)
    proto.opset_import.extend(helper.make_opsetid(d, v) for d, v in sorted(opsets.items()))
    if isinstance(model, Model):
        proto.producer_name = model.producer_name
        proto.producer_version = model.producer_version
        proto.domain = model.domain
        proto.model_version = model.model_version
        proto.doc_string = model.doc
        for k, v in model.metadata.items():
            proto.metadata_props.add(key=k, value=v)
    if ir_version is not None:
        proto.ir_version = min(proto.ir_version, ir_version)
    return proto


def graph_to_onnx(graph: Graph, external: ExternalWeights | None = None) -> P.GraphProto:
    """``graph`` as a ``GraphProto`` (node output types as ``value_info``)."""
    g = P.GraphProto()
    _fill_graph(g, graph, external)
    return g


def _fill_graph(g: P.GraphProto, graph: Graph, external: ExternalWeights | None) -> None:
    """Write ``graph`` into the empty ``g`` (``helper.make_graph`` of
    ``helper.make_node`` s, built in place: no proto is copied)."""
    for n in graph.nodes:
        names = [v.name if v is not None else "" for v in n.inputs]
        while names and not names[-1]:  # trailing omitted inputs: the same node (ORT's LayerNormalization
            names.pop()                 # segfaults on an explicit empty last input)
        p = g.node.add()
        p.op_type = n.op_type
        p.input.extend(names)
        p.output.extend(v.name for v in n.outputs)
        if n.name:
            p.name = n.name
        if n.doc:
            p.doc_string = n.doc
        if n.domain:
            p.domain = n.domain
        if n.attributes:
            p.attribute.extend(attribute_to_proto(a) for a in n.attributes.values())
    g.name = graph.name
    types: dict[ValueType, P.TypeProto] = {}  # one TypeProto per distinct type, copied into each value_info
    for vis, values in ((g.input, graph.inputs), (g.output, graph.outputs)):
        for v in values:
            _add_value_info(vis, v, types)
    g.initializer.extend(_initializer(v.const, v.name, external) for v in graph.initializers.values())
    outputs = {id(v) for v in graph.outputs}
    for n in graph.nodes:
        for v in n.outputs:
            if v.name and v.type is not None and id(v) not in outputs:
                _add_value_info(g.value_info, v, types)
    if graph.doc:
        g.doc_string = graph.doc


def _add_value_info(vis: Any, v: Value, types: dict[ValueType, P.TypeProto]) -> None:
    vi = vis.add()
    vi.name = v.name
    if v.type is not None:
        try:
            tp = types.get(v.type)
            if tp is None:
                tp = types[v.type] = type_to_proto(v.type)
        except TypeError:  # a type holding a list: not hashable, not cached
            tp = type_to_proto(v.type)
        vi.type.CopyFrom(tp)


def _initializer(arr: np.ndarray, name: str, external: ExternalWeights | None) -> P.TensorProto:
    ref = external.take(arr, name) if external is not None else None
    return ref if ref is not None else array_to_tensor(arr, name)


def array_to_tensor(arr: np.ndarray, name: str) -> P.TensorProto:
    """``arr`` as a ``TensorProto`` (object arrays as strings)."""
    if arr.dtype == object:
        t = P.TensorProto(name=name, data_type=P.TensorProto.STRING, dims=arr.shape)
        t.string_data.extend(x.encode("utf-8") if isinstance(x, str) else bytes(x) for x in arr.flat)
        return t
    return helper.from_array(arr, name)


def type_to_proto(t: ValueType | None) -> P.TypeProto:
    """An IR type as an ONNX ``TypeProto`` (empty for ``None``)."""
    if isinstance(t, TensorType):
        shape = None if t.shape is None else [d if d is not None else None for d in t.shape]
        return helper.make_tensor_type_proto(int(t.dtype), shape)
    if isinstance(t, SequenceType):
        return helper.make_sequence_type_proto(type_to_proto(t.elem))
    if isinstance(t, OptionalType):
        return helper.make_optional_type_proto(type_to_proto(t.elem))
    return P.TypeProto()


def value_info(v: Value) -> P.ValueInfoProto:
    """The ``ValueInfoProto`` declaring ``v``'s name and type."""
    vi = P.ValueInfoProto(name=v.name)
    if v.type is not None:
        vi.type.CopyFrom(type_to_proto(v.type))
    return vi


#: attribute kinds written without ``make_attribute`` when their value has the plain Python type
_PLAIN_FIELDS = {AttrKind.INT: "i", AttrKind.INTS: "ints", AttrKind.FLOAT: "f", AttrKind.FLOATS: "floats"}
_PLAIN_TYPES = {AttrKind.INT: (int, False), AttrKind.INTS: (int, True), AttrKind.FLOAT: (float, False),
                AttrKind.FLOATS: (float, True)}


def _plain(value: Any, want: tuple[type, bool]) -> bool:
    """``value`` is exactly a ``want[0]`` (``bool`` is not an ``int`` here), or, when
    ``want[1]``, a list of them."""
    cls, many = want
    if not many:
        return type(value) is cls
    return type(value) is list and all(type(x) is cls for x in value)


def attribute_to_proto(a: Attribute) -> P.AttributeProto:
    """An IR attribute as an ``AttributeProto``; :class:`GraphError` when its value does not fit its kind."""
    value: Any = a.value
    k = a.kind
    if a.ref_attr_name:
        p = P.AttributeProto(name=a.name, type=int(k), ref_attr_name=a.ref_attr_name)
        return p
    field = _PLAIN_FIELDS.get(k)
    if field is not None and _plain(value, _PLAIN_TYPES[k]):  # the usual ints and floats: set directly
        try:
            return P.AttributeProto(name=a.name, type=int(k), **{field: value})
        except (TypeError, ValueError) as e:  # e.g. an int beyond int64
            raise GraphError(f"attribute {a.name!r} ({k.name}) cannot be exported: {e}") from e
    if k == AttrKind.TENSOR:
        value = array_to_tensor(np.asarray(value), "")
    elif k == AttrKind.TENSORS:
        value = [array_to_tensor(np.asarray(x), "") for x in value]
    elif k == AttrKind.GRAPH:
        value = graph_to_onnx(value)
    elif k == AttrKind.GRAPHS:
        value = [graph_to_onnx(g) for g in value]
    elif k == AttrKind.TYPE_PROTO:
        value = type_to_proto(value)
    elif k == AttrKind.TYPE_PROTOS:
        value = [type_to_proto(x) for x in value]
    try:
        return helper.make_attribute(a.name, value, attr_type=int(k))
    except (TypeError, ValueError) as e:
        raise GraphError(f"attribute {a.name!r} ({k.name}) cannot be exported: {e}") from e


