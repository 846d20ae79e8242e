"""ONNX shape inference on IR graphs and nodes (IR -> ONNX -> inference -> IR)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from nnrt_core.frontends.onnx.convert import type_from_proto
from nnrt_core.frontends.onnx import onnx_api
from nnrt_core.frontends.onnx.bounded_inference import infer_shapes_bounded
from nnrt_core.frontends.onnx.export import array_to_tensor, attribute_to_proto, to_onnx, type_to_proto
from nnrt_core.frontends.onnx.onnx_api import P
from nnrt_core.frontends.onnx.proto_build import make_node, make_tensor_value_info, np_dtype_to_tensor_dtype
from nnrt_core.frontends.onnx.protos import first_line
from nnrt_core.ir import Attribute, DataType, Graph, TensorType, ValueType
from nnrt_core.logs import get_logger

__all__ = ["DATA_LIMIT", "NodeInferenceError", "infer_node_types", "infer_static_types", "refine_static_shapes"]

log = get_logger("nnrt.onnx")

#: initializers with more elements than this are handed to shape inference as
#: typed inputs without data (no op infers a shape from a large tensor's values)
DATA_LIMIT = 4096


class NodeInferenceError(ValueError):
    """ONNX shape inference rejected one node (its message: the first line of ONNX's)."""


def infer_static_types(graph: Graph, input_shapes: Mapping[str, Sequence[int]] | None = None
                       ) -> dict[str, TensorType]:
    """The static tensor types ONNX shape inference (with data propagation)
    gives the values of ``graph`` (top-level node outputs and graph outputs),
    by name.

    Without ``input_shapes`` the static types already recorded on node
    outputs are kept as facts and the others are inferred again; with it
    (graph input name -> concrete dims; names and ranks checked by the
    caller) those inputs take the given shapes and no recorded intermediate
    type is kept.  Initializers above ``DATA_LIMIT`` elements are given as
    typed inputs without data (their data is never exported: a build of
    MiniLM spent ~0.1 s serializing weights that inference does not read).
    Export and inference errors propagate."""
    proto = to_onnx(graph, external=_TypesOnly())
    g = proto.graph
    if input_shapes is None:
        static = {v.name for n in graph.nodes for v in n.outputs if isinstance(v.type, TensorType) and v.type.is_static}
    else:
        static = set()
        _fix_input_dims(g, input_shapes)
    keep = [vi for vi in g.value_info if vi.name in static]
    del g.value_info[:]
    g.value_info.extend(keep)
    _drop_large_data(g)
    inferred = infer_shapes_bounded(proto)
    types: dict[str, TensorType] = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        t = type_from_proto(vi.type)
        if isinstance(t, TensorType) and t.is_static:
            types[vi.name] = t
    return types


def _fix_input_dims(g: P.GraphProto, input_shapes: Mapping[str, Sequence[int]]) -> None:
    for inp in g.input:
        if inp.name in input_shapes and inp.type.HasField("tensor_type"):
            for d, n in zip(inp.type.tensor_type.shape.dim, input_shapes[inp.name]):
                d.ClearField("dim_param")
                d.dim_value = int(n)


class _TypesOnly:
    """``to_onnx``'s ``external`` collector that writes an initializer above
    ``DATA_LIMIT`` elements as its name, element type and dims only (for
    :func:`_drop_large_data`); other initializers are exported with data."""

    def take(self, arr: np.ndarray, name: str) -> Any:
        if arr.size <= DATA_LIMIT or arr.dtype == object:
            return None
        try:
            dtype = np_dtype_to_tensor_dtype(arr.dtype)
        except (KeyError, TypeError, ValueError):  # a dtype without an ONNX element type: exported as before
            return None
        return P.TensorProto(name=name, data_type=dtype, dims=arr.shape)


def _drop_large_data(g: P.GraphProto) -> None:
    """Turn initializers above ``DATA_LIMIT`` elements into typed graph inputs."""
    big = [t for t in g.initializer if int(np.prod(t.dims, dtype=np.int64)) > DATA_LIMIT]
    if big:
        small = [t for t in g.initializer if int(np.prod(t.dims, dtype=np.int64)) <= DATA_LIMIT]
        for t in big:
            g.input.append(make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        del g.initializer[:]
        g.initializer.extend(small)


def refine_static_shapes(graph: Graph) -> int:
    """Re-run ONNX shape inference over ``graph`` (after graph passes have
    folded Shape chains into constants) and give every top-level node output
    whose type is not static the static type inferred for it, when that type
    agrees with what was known (element type, rank, fixed dimensions).

    Used when ``ScheduleConfig.input_shapes`` made the inputs static: ONNX's
    data propagation stops at ops like Cast, so Reshape targets computed from
    ``Shape`` stay unknown until nnrt has folded them.  Returns the number of
    values refined; inference problems leave the graph unchanged."""
    pending = {v.name: v for n in graph.nodes for v in n.outputs
               if v.name and not (isinstance(v.type, TensorType) and v.type.is_static)}
    if not pending:
        return 0
    try:
        inferred = infer_static_types(graph)
    except Exception as e:  # an exotic graph: keep the types we have
        log.info("shape refinement skipped: %s", first_line(e))
        return 0
    refined = 0
    for name, new in inferred.items():
        v = pending.get(name)
        if v is not None and _agrees(v.type, new):
            v.type = new
            refined += 1
    return refined


def _agrees(old: ValueType | None, new: TensorType) -> bool:
    """True when static ``new`` refines ``old`` (same element type, rank and fixed dims)."""
    if isinstance(old, TensorType):
        if old.dtype not in (DataType.UNDEFINED, new.dtype):
            return False
        return old.shape is None or (len(old.shape) == len(new.shape) and not any(
            isinstance(a, int) and a != b for a, b in zip(old.shape, new.shape)))
    return old is None


def infer_node_types(schema: Any, op_type: str, domain: str, input_names: Sequence[str],
                     output_names: Sequence[str], attributes: Sequence[Attribute],
                     types: Mapping[str, ValueType], data: Mapping[str, np.ndarray],
                     opsets: Mapping[str, int]) -> list[ValueType | None]:
    """Output types of one ``op_type`` node by ONNX's per-node inference
    against ``schema`` (an ``onnx.defs.OpSchema``): ``types`` are the known
    input types and ``data`` the input values inference may read, by name.

    An attribute ONNX cannot hold raises ``GraphError``; an inference
    failure :class:`NodeInferenceError`."""
    node = make_node(op_type, list(input_names), list(output_names), domain=domain or None)
    node.attribute.extend(attribute_to_proto(a) for a in attributes)
    type_protos = {name: type_to_proto(t) for name, t in types.items()}
    data_protos = {name: array_to_tensor(arr, name) for name, arr in data.items()}
    try:
        inferred = onnx_api.infer_node_outputs(schema, node, type_protos, data_protos, dict(opsets))
    except Exception as e:  # InferenceError, ValidationError, SchemaError
        raise NodeInferenceError(first_line(e)) from e
    return [type_from_proto(inferred[n]) if n in inferred else None for n in output_names]
