"""ONNX shape inference without the weights' round trip.

``onnx``'s shape inference takes a serialized model and hands back a new
one: the weights go through C++ parsing, serializing and our parsing again
(PP-OCRv4 rec, 10.9 MB: 28 ms of which 6.5 are inference).  Inference needs
a weight's element type and dims, never its values, except for the small
tensors that give shapes (Reshape's shape, Slice's starts, Resize's scales:
a few elements each, read by data propagation).

So for a large model (:data:`LEAN_MIN_BYTES`) the large weight tensors
(float or 8/16-bit integer initializers and ``Constant`` values of at least
:data:`LEAN_MIN_ELEMENTS` elements) go to inference as graph inputs of the
same type and dims, and what inference adds (``value_info`` and the graph
outputs' types) is written back into the model we parsed, with the
``value_info`` of the ``Constant`` outputs taken out (as inference writes
it: element type and dims).  A tensor whose name has a declared type stays.  Models with sub-graphs or local functions, and
``ModelProto`` s of the caller (never modified), take the plain path.
``tests/test_cold_build.py`` compares both paths byte for byte.
"""
from __future__ import annotations

import math
from typing import Any

from nnrt_core.frontends.onnx import onnx_api
from nnrt_core.frontends.onnx.bounded_inference import infer_shapes_bounded
from nnrt_core.frontends.onnx.onnx_api import P

__all__ = ["LEAN_MIN_BYTES", "LEAN_MIN_ELEMENTS", "infer_shapes_lean"]

#: serialized models at least this large take the lean path (below, the Python copy costs more than it saves)
LEAN_MIN_BYTES = 4 << 20
#: weight tensors at least this large go to inference as typed inputs (no shape tensor is this large)
LEAN_MIN_ELEMENTS = 1024

#: element types of weights, never of shapes (shapes are int64, some ops' int32): floats and 8/16-bit integers
_WEIGHT_TYPES = frozenset(getattr(P.TensorProto, n) for n in (
    "FLOAT", "FLOAT16", "DOUBLE", "BFLOAT16", "INT8", "UINT8", "INT16", "UINT16", "INT4", "UINT4",
    "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ") if hasattr(P.TensorProto, n))
_GRAPH_KINDS = (P.AttributeProto.GRAPH, P.AttributeProto.GRAPHS)


def infer_shapes_lean(proto: P.ModelProto, data: bytes | None, *, owned: bool) -> P.ModelProto:
    """:func:`~nnrt_core.frontends.onnx.bounded_inference.infer_shapes_bounded` of
    ``proto`` (``data``: the bytes it was parsed from, if still the same).
    With ``owned`` (a proto this load parsed) a large model is inferred
    without its large weights and the result written into ``proto``."""
    size = len(data) if data is not None else proto.ByteSize()
    if not owned or size < LEAN_MIN_BYTES or proto.functions or _has_subgraphs(proto.graph):
        return infer_shapes_bounded(proto if data is None else data)
    try:
        lean, constants = _without_weights(proto)
        inferred = infer_shapes_bounded(lean)
    except Exception:  # whatever the lean copy trips on: the plain path decides (and its error is reported)
        return infer_shapes_bounded(proto if data is None else data)
    g, ig = proto.graph, inferred.graph
    declared = {vi.name for vi in g.value_info}
    added = [vi for vi in ig.value_info if vi.name not in declared]
    del g.value_info[:]
    g.value_info.extend(vi for vi in ig.value_info if vi.name in declared)
    g.value_info.extend(_in_node_order(g, added, constants))
    del g.output[:]
    g.output.extend(ig.output)
    return proto


def _has_subgraphs(g: P.GraphProto) -> bool:
    return any(a.type in _GRAPH_KINDS for n in g.node for a in n.attribute)


def _large(t: P.TensorProto) -> bool:
    return t.data_type in _WEIGHT_TYPES and t.data_location != P.TensorProto.EXTERNAL and \
        math.prod(t.dims) >= LEAN_MIN_ELEMENTS


def _constant_tensor(n: P.NodeProto) -> P.TensorProto | None:
    if n.op_type != "Constant" or n.domain not in ("", "ai.onnx") or len(n.attribute) != 1 or len(n.output) != 1:
        return None
    a = n.attribute[0]
    return a.t if a.name == "value" and a.type == P.AttributeProto.TENSOR and not a.ref_attr_name else None


def _typed(name: str, t: P.TensorProto) -> P.ValueInfoProto:
    """The ``ValueInfoProto`` shape inference gives a tensor ``t`` named ``name``."""
    vi = P.ValueInfoProto(name=name)
    tt = vi.type.tensor_type
    tt.elem_type = t.data_type
    tt.shape.SetInParent()
    for d in t.dims:
        tt.shape.dim.add().dim_value = d
    return vi


def _without_weights(proto: P.ModelProto) -> tuple[P.ModelProto, dict[str, P.ValueInfoProto]]:
    """A copy of ``proto`` whose large float tensors are typed graph inputs,
    and the types of the ``Constant`` outputs it left out (by name)."""
    lean = P.ModelProto()
    for fd, value in proto.ListFields():
        if fd.name != "graph":
            _set(lean, fd, value)
    g, lg = proto.graph, lean.graph
    for fd, value in g.ListFields():
        if fd.name not in ("node", "initializer"):
            _set(lg, fd, value)
    kept = {vi.name for vi in g.input} | {vi.name for vi in g.value_info}  # declared types: left to inference
    constants: dict[str, P.ValueInfoProto] = {}
    for n in g.node:
        t = _constant_tensor(n)
        if t is not None and _large(t) and n.output[0] not in kept:
            constants[n.output[0]] = vi = _typed(n.output[0], t)
            lg.input.append(vi)
        else:
            lg.node.append(n)
    for t in g.initializer:
        if _large(t) and t.name not in kept:  # e.g. an initializer listed as an input (IR < 4) keeps its data
            lg.input.append(_typed(t.name, t))
        else:
            lg.initializer.append(t)
    return lean, constants


def _set(msg: Any, fd: Any, value: Any) -> None:
    repeated = fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED  # protobuf < 5.29
    if repeated:
        getattr(msg, fd.name).extend(value)
    elif fd.message_type is not None:
        getattr(msg, fd.name).CopyFrom(value)
    else:
        setattr(msg, fd.name, value)


def _in_node_order(g: P.GraphProto, added: list[P.ValueInfoProto],
                   constants: dict[str, P.ValueInfoProto]) -> list[P.ValueInfoProto]:
    """The value_info inference added, with the left-out ``Constant``
    outputs' in their places: node outputs in node order, as inference
    appends them."""
    by_name = {vi.name: vi for vi in added}
    out = []
    for n in g.node:
        for o in n.output:
            vi = by_name.pop(o, None)
            if vi is None:
                vi = constants.get(o)
            if vi is not None:
                out.append(vi)
    out.extend(by_name.values())  # anything else inference added, in its order
    return out
