"""Small ONNX proto helpers shared by the frontend's modules."""
from __future__ import annotations

import os
import sys
from typing import Iterator

import numpy as np

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends.onnx.onnx_api import P
from nnrt_core.frontends.onnx.proto_build import tensor_dtype_to_np_dtype
from nnrt_core.ir import DataType
from nnrt_core.control import DEFAULT_MAX_TENSOR_BYTES

__all__ = ["MAX_TENSOR_BYTES", "ModelProto", "ModelSource", "PACKED_TYPES", "all_tensors", "attribute_graphs", "copy_model",
           "declared_bytes", "first_line", "mappable_dtype", "subgraphs", "unknown_dim"]

#: Largest tensor (bytes) a model may declare; larger ones are refused before allocation
#: (``NNRT_MAX_TENSOR_BYTES``, also the default memory budget of computed tensors).
MAX_TENSOR_BYTES = DEFAULT_MAX_TENSOR_BYTES

ModelProto = P.ModelProto

#: What the loaders accept: a path, serialized bytes or a parsed ``ModelProto``.
ModelSource = str | os.PathLike | bytes | ModelProto

#: sub-byte element types: several elements per byte, never viewed in place
PACKED_TYPES = frozenset(
    {DataType.INT4, DataType.UINT4, DataType.FLOAT4E2M1, DataType.INT2, DataType.UINT2,
     DataType.FLOAT6E2M3, DataType.FLOAT6E3M2}
)


def first_line(e: BaseException) -> str:
    """The first line of an exception's message (its type name when empty)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def copy_model(proto: ModelProto) -> ModelProto:
    """A deep copy of ``proto``."""
    c = ModelProto()
    c.CopyFrom(proto)
    return c


def attribute_graphs(a: P.AttributeProto) -> Iterator[P.GraphProto]:
    """The graphs an attribute holds (one for GRAPH, several for GRAPHS, else none)."""
    if a.type == P.AttributeProto.GRAPH:
        yield a.g
    elif a.type == P.AttributeProto.GRAPHS:
        yield from a.graphs


def subgraphs(n: P.NodeProto) -> Iterator[P.GraphProto]:
    """The graphs in ``n``'s attributes (If branches, Loop/Scan bodies)."""
    for a in n.attribute:
        yield from attribute_graphs(a)


def _graph_tensors(g: P.GraphProto) -> Iterator[P.TensorProto]:
    yield from g.initializer
    for n in g.node:
        for a in n.attribute:
            if a.type == P.AttributeProto.TENSOR:
                yield a.t
            elif a.type == P.AttributeProto.TENSORS:
                yield from a.tensors
            elif a.type == P.AttributeProto.SPARSE_TENSOR:
                yield a.sparse_tensor.values
                yield a.sparse_tensor.indices
            elif a.type == P.AttributeProto.GRAPH:
                yield from _graph_tensors(a.g)
            elif a.type == P.AttributeProto.GRAPHS:
                for g2 in a.graphs:
                    yield from _graph_tensors(g2)


def all_tensors(proto: ModelProto) -> Iterator[P.TensorProto]:
    """Every tensor of ``proto`` that may hold data: initializers and tensor
    attributes of the graph and its sub-graphs, tensor attributes of local
    functions."""
    yield from _graph_tensors(proto.graph)
    for f in proto.functions:
        for n in f.node:
            for a in n.attribute:
                if a.type == P.AttributeProto.TENSOR:
                    yield a.t


def unknown_dim(d: P.TensorShapeProto.Dimension) -> bool:
    """A dimension that says "any size" in a non-standard way: a negative
    ``dim_value`` (Paddle2ONNX writes -1) or the ``dim_param`` "?" (which
    ONNX would otherwise take for one symbol shared by every such dim)."""
    return (d.HasField("dim_value") and d.dim_value < 0) or (d.HasField("dim_param") and d.dim_param == "?")


def declared_bytes(t: P.TensorProto) -> int | None:
    """Bytes a fixed-width tensor must hold, after checking the size limit."""
    n = 1
    for d in t.dims:
        if d < 0:
            raise ModelLoadError(f"tensor {t.name!r} has a negative dimension {list(t.dims)}")
        n *= d
    try:
        dtype = DataType(t.data_type)
    except ValueError:
        raise ModelLoadError(f"tensor {t.name!r} has unknown element type {t.data_type}") from None
    if dtype == DataType.STRING:
        return None
    packed = dtype in PACKED_TYPES  # sub-byte types: several elements per byte
    nbytes = n if packed else n * (dtype.itemsize if dtype != DataType.UNDEFINED else 1)
    if nbytes > MAX_TENSOR_BYTES:
        raise ModelLoadError(
            f"tensor {t.name!r} declares shape {list(t.dims)} ({nbytes} bytes), above the "
            f"limit of {MAX_TENSOR_BYTES} bytes (NNRT_MAX_TENSOR_BYTES); refused"
        )
    return None if packed else nbytes


def mappable_dtype(t: P.TensorProto) -> np.dtype | None:
    """The numpy type that views ``t``'s raw bytes as they are (what
    ``numpy_helper.to_array`` decodes raw data to), or ``None`` where the
    data needs decoding: strings, bit-packed types (int4, float4, 2- and
    6-bit types), unknown types, segments, or a big-endian host."""
    if sys.byteorder != "little" or t.data_type in (P.TensorProto.STRING, P.TensorProto.UNDEFINED) \
            or t.HasField("segment"):
        return None
    try:
        dt = DataType(t.data_type)
        if dt in PACKED_TYPES:
            return None
        np_dtype = tensor_dtype_to_np_dtype(t.data_type)
    except (ValueError, KeyError, TypeError):
        return None
    return np_dtype if np_dtype.itemsize == dt.itemsize and not np_dtype.hasobject else None
