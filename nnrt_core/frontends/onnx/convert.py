"""ONNX protos -> nnrt IR: tensors, types, attributes, graphs and models."""
from __future__ import annotations

import math
import sys
from typing import Any, Callable, Mapping

import numpy as np

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends.onnx import protos
from nnrt_core.frontends.onnx.external_data import mapped_key
from nnrt_core.frontends.onnx.onnx_api import P
from nnrt_core.frontends.onnx.proto_build import to_array
from nnrt_core.frontends.onnx.protos import MAX_TENSOR_BYTES, declared_bytes, first_line, mappable_dtype
from nnrt_core.ir import (
    Attribute,
    AttrKind,
    DataType,
    Graph,
    Model,
    Node,
    OptionalType,
    SequenceType,
    TensorType,
    Value,
    ValueType,
)

__all__ = ["direct_array", "model_from_proto", "sparse_to_dense", "tensor_to_array", "type_from_proto"]


def tensor_to_array(t: P.TensorProto, mapped: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """Decode a ``TensorProto``, refusing inconsistent or oversized data.

    A tensor ``load_external_data`` read into ``mapped`` is a view of its
    array there (no further copy); any other external tensor is refused (its file
    was never checked).  Plain in-file tensors take :func:`direct_array`."""
    arr = direct_array(t)
    if arr is not None:
        return arr
    declared = declared_bytes(t)
    if t.data_location == P.TensorProto.EXTERNAL:
        key = mapped_key(t)
        raw = mapped.get(key) if mapped is not None and key is not None else None
        dtype = mappable_dtype(t)
        if raw is None or dtype is None:
            raise ModelLoadError(f"tensor {t.name!r} stores its data in an external file that was not loaded "
                                 "(only initializers and tensor attributes of a model loaded from a path are)")
        if declared is None or raw.nbytes != declared:
            raise ModelLoadError(f"tensor {t.name!r} declares shape {list(t.dims)} ({declared} bytes) "
                                 f"but its external data holds {raw.nbytes} bytes")
        return raw.view(dtype).reshape(tuple(t.dims))
    if t.HasField("raw_data") and declared is not None and len(t.raw_data) != declared:
        raise ModelLoadError(
            f"tensor {t.name!r} declares shape {list(t.dims)} ({declared} bytes) "
            f"but holds {len(t.raw_data)} bytes of data"
        )
    try:
        arr = to_array(t)
    except Exception as e:
        raise ModelLoadError(f"tensor {t.name!r} could not be decoded: {first_line(e)}") from e
    if arr.dtype == object:
        arr = np.array([x.decode("utf-8") if isinstance(x, bytes) else x for x in arr.flat],
                       dtype=object).reshape(arr.shape)
    return arr


def sparse_to_dense(sp: P.SparseTensorProto, mapped: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """A ``SparseTensorProto`` as a dense array (size-checked)."""
    values = tensor_to_array(sp.values, mapped)
    dims = tuple(sp.dims)
    n = int(np.prod(dims)) if dims else 1
    if n * values.dtype.itemsize > MAX_TENSOR_BYTES:
        raise ModelLoadError(f"sparse tensor of shape {dims} is too large to densify")
    dense = np.zeros(n, dtype=values.dtype)
    idx = tensor_to_array(sp.indices, mapped).astype(np.int64)
    if idx.ndim == 2:
        idx = np.ravel_multi_index(idx.T, dims)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ModelLoadError("sparse tensor index out of range")
    dense[idx.reshape(-1)] = values.reshape(-1)
    return dense.reshape(dims)


#: element type number -> DataType (an enum call per value costs ~1 us)
_DTYPES: dict[int, DataType] = {int(d): d for d in DataType}
#: attribute type number -> AttrKind
_KINDS: dict[int, AttrKind] = {int(k): k for k in AttrKind}
#: element type -> (NumPy type, storage field) of tensors decoded here directly: NumPy's own fixed-width
#: types whose storage field holds them as they are (the others go through ``tensor_to_array``)
_DIRECT: dict[int, tuple[np.dtype, str]] = {
    P.TensorProto.FLOAT: (np.dtype(np.float32), "float_data"),
    P.TensorProto.DOUBLE: (np.dtype(np.float64), "double_data"),
    P.TensorProto.INT32: (np.dtype(np.int32), "int32_data"),
    P.TensorProto.INT64: (np.dtype(np.int64), "int64_data"),
}
_LITTLE = sys.byteorder == "little"


def _dim(d: P.TensorShapeProto.Dimension) -> int | str | None:
    """One dimension: its size, its symbol, or ``None`` for "any size" (unset, a
    negative ``dim_value`` as Paddle2ONNX writes -1, or the ``dim_param`` "?")."""
    which = d.WhichOneof("value")
    if which == "dim_value":
        v = d.dim_value
        return None if v < 0 else v
    if which == "dim_param":
        p = d.dim_param
        return None if p == "?" else (p or None)
    return None


def type_from_proto(tp: P.TypeProto) -> ValueType | None:
    """An ONNX ``TypeProto`` as an IR type (``None`` for kinds the IR lacks)."""
    kind = tp.WhichOneof("value")
    if kind == "tensor_type" or kind == "sparse_tensor_type":
        tt = getattr(tp, kind)
        shape = tuple(_dim(d) for d in tt.shape.dim) if tt.HasField("shape") else None
        return TensorType(_DTYPES.get(tt.elem_type, DataType.UNDEFINED), shape)
    if kind == "sequence_type":
        return SequenceType(type_from_proto(tp.sequence_type.elem_type))
    if kind == "optional_type":
        return OptionalType(type_from_proto(tp.optional_type.elem_type))
    return None


def direct_array(t: P.TensorProto) -> np.ndarray | None:
    """``t`` decoded without the general checks when it is a plain in-file
    float32/float64/int32/int64 tensor whose size and data agree (the usual
    case: ``Constant`` values, weights); ``None`` otherwise (then
    :func:`tensor_to_array` decodes it, or raises its error)."""
    direct = _DIRECT.get(t.data_type)
    if direct is None or t.data_location == P.TensorProto.EXTERNAL or t.HasField("segment"):
        return None
    dtype, field = direct
    dims = tuple(t.dims)
    if dims and min(dims) < 0:
        return None
    n = math.prod(dims)
    if n * dtype.itemsize > protos.MAX_TENSOR_BYTES:
        return None
    if t.HasField("raw_data"):
        raw = t.raw_data
        if not _LITTLE or len(raw) != n * dtype.itemsize:
            return None
        return np.frombuffer(raw, dtype=dtype).reshape(dims)
    data = getattr(t, field)
    if len(data) != n:
        return None
    return np.array(data, dtype=dtype).reshape(dims)


def model_from_proto(proto: P.ModelProto, mapped: Mapping[str, np.ndarray] | None = None) -> Model:
    """Translate a (checked, inlined) ``ModelProto`` into an IR ``Model``;
    ``mapped``: the external data ``load_external_data`` mapped."""
    return _ProtoConverter(mapped).model(proto)


class _ProtoConverter:
    """Translates protos into IR, resolving names through nested scopes."""

    def __init__(self, mapped: Mapping[str, np.ndarray] | None = None) -> None:
        self.mapped = mapped
        self.types: dict[bytes, ValueType | None] = {}  # serialized TypeProto -> its (frozen) IR type

    def model(self, proto: P.ModelProto) -> Model:
        opsets = {(o.domain or ""): o.version for o in proto.opset_import}
        graph = self.graph(proto.graph, opsets, parent=None, scope=[])
        graph.origin = "onnx"
        return Model(
            graph=graph,
            ir_version=proto.ir_version,
            producer_name=proto.producer_name,
            producer_version=proto.producer_version,
            domain=proto.domain,
            model_version=proto.model_version,
            doc=proto.doc_string,
            metadata={p.key: p.value for p in proto.metadata_props},
        )

    def graph(
        self,
        gp: P.GraphProto,
        opsets: dict[str, int],
        parent: Graph | None,
        scope: list[dict[str, Value]],
    ) -> Graph:
        g = Graph(gp.name or "graph", opset_imports=opsets if parent is None else {}, parent=parent,
                  doc=gp.doc_string)
        local: dict[str, Value] = {}
        types = {vi.name: self.type(vi.type) for vi in gp.value_info}
        for vi in gp.output:
            if vi.name not in types:
                types[vi.name] = self.type(vi.type)
        for t in gp.initializer:
            v = Value(t.name, const=self.tensor(t))
            g.add_initializer(v)
            local[t.name] = v
        for vi in gp.input:
            if vi.name in local:
                # IR < 4 models list initializers as inputs too; we keep them as constants
                continue
            v = Value(vi.name, self.type(vi.type))
            g.inputs.append(v)
            local[vi.name] = v
        chain = scope + [local]
        for k, np_ in enumerate(gp.node):
            g.add_node(self.node(np_, k, g, chain, types))
        for vi in gp.output:
            v = local.get(vi.name)
            if v is None:
                try:
                    v = _lookup(chain, g, vi.name, "graph output", 0)
                except ModelLoadError:
                    raise ModelLoadError(f"graph {g.name!r}: output {vi.name!r} is never produced") from None
            if v.type is None:
                v.type = self.type(vi.type)
            g.outputs.append(v)
        for name, t in types.items():
            if name in local and local[name].type is None:
                local[name].type = t
        _make_names_unique(g)
        return g

    def tensor(self, t: P.TensorProto) -> np.ndarray:
        """``t`` as an array (:func:`tensor_to_array` with this model's external data)."""
        return tensor_to_array(t, self.mapped)

    def type(self, tp: P.TypeProto) -> ValueType | None:
        """:func:`type_from_proto`, once per distinct type (a model's values share
        a few hundred types at most: serializing is cheaper than reading the dims)."""
        key = tp.SerializeToString()
        t = self.types.get(key, _MISSING)
        if t is _MISSING:
            t = self.types[key] = type_from_proto(tp)
        return t

    def node(self, np_: P.NodeProto, k: int, g: Graph, chain: list[dict[str, Value]],
             types: Mapping[str, ValueType | None]) -> Node:
        """The IR node of ``np_`` (the ``k``-th node of ``g``); its outputs
        are declared in the innermost scope of ``chain``."""
        local = chain[-1]
        inputs: list[Value | None] = []
        for i, n in enumerate(np_.input):
            v = local.get(n) if n else None
            inputs.append(v if v is not None or not n else _lookup(chain, g, n, _desc(np_, k), i))
        outputs = []
        for n in np_.output:
            v = Value(n, types.get(n))
            if n:
                if n in local:
                    raise ModelLoadError(f"graph {g.name!r}: {_desc(np_, k)} redefines value {n!r}")
                local[n] = v
            outputs.append(v)
        attrs = [self.attribute(a, g, chain, np_, k) for a in np_.attribute] if len(np_.attribute) else ()
        return Node(
            np_.op_type,
            inputs,
            outputs,
            name=np_.name or f"{np_.op_type}_{k}",
            domain=np_.domain,
            attributes=attrs,
            doc=np_.doc_string,
        )

    def attribute(self, a: P.AttributeProto, g: Graph, chain: list[dict[str, Value]], np_: P.NodeProto,
                  k: int) -> Attribute:
        """The IR attribute of ``a`` (of node ``np_``, the ``k``-th of ``g``)."""
        kind = _KINDS.get(a.type)
        read = _READERS.get(kind) if kind is not None else None
        try:
            if read is not None:
                value = read(self, a, g, chain)
            elif kind == AttrKind.SPARSE_TENSOR:
                return Attribute(a.name, AttrKind.TENSOR, sparse_to_dense(a.sparse_tensor, self.mapped),
                                 ref_attr_name=a.ref_attr_name or None)
            else:
                raise ModelLoadError(f"{_desc(np_, k)}: attribute {a.name!r} has unsupported kind "
                                     f"{AttrKind(a.type).name}")
        except ModelLoadError as e:
            desc = _desc(np_, k)
            if desc in str(e):
                raise
            raise ModelLoadError(f"{desc}: attribute {a.name!r}: {e}") from e
        return Attribute(a.name, kind, value, ref_attr_name=a.ref_attr_name or None)


_MISSING: Any = object()


def _desc(np_: P.NodeProto, k: int) -> str:
    """How errors name node ``np_`` (the ``k``-th of its graph)."""
    return f"node {np_.name or f'#{k}'!r} ({np_.op_type})"


def _utf8(s: bytes) -> str:
    return s.decode("utf-8", errors="surrogateescape")


#: attribute kind -> reader of its Python value (converter, attribute, graph, scope chain); SPARSE_TENSOR
#: (read as a dense TENSOR) and the kinds the IR lacks are handled by ``_ProtoConverter.attribute``
_READERS: dict[AttrKind, Callable[[_ProtoConverter, P.AttributeProto, Graph, list[dict[str, Value]]], Any]] = {
    AttrKind.FLOAT: lambda cv, a, g, chain: float(a.f),
    AttrKind.INT: lambda cv, a, g, chain: int(a.i),
    AttrKind.STRING: lambda cv, a, g, chain: _utf8(a.s),
    AttrKind.TENSOR: lambda cv, a, g, chain: cv.tensor(a.t),
    AttrKind.GRAPH: lambda cv, a, g, chain: cv.graph(a.g, {}, g, chain),
    AttrKind.FLOATS: lambda cv, a, g, chain: list(a.floats),
    AttrKind.INTS: lambda cv, a, g, chain: list(a.ints),
    AttrKind.STRINGS: lambda cv, a, g, chain: [_utf8(s) for s in a.strings],
    AttrKind.TENSORS: lambda cv, a, g, chain: [cv.tensor(t) for t in a.tensors],
    AttrKind.GRAPHS: lambda cv, a, g, chain: [cv.graph(x, {}, g, chain) for x in a.graphs],
    AttrKind.TYPE_PROTO: lambda cv, a, g, chain: type_from_proto(a.tp),
    AttrKind.TYPE_PROTOS: lambda cv, a, g, chain: [type_from_proto(t) for t in a.type_protos],
}




def _lookup(chain: list[dict[str, Value]], g: Graph, name: str, node_desc: str, i: int) -> Value:
    """The value ``name`` resolves to, innermost scope first."""
    for frame in reversed(chain):
        if name in frame:
            return frame[name]
    raise ModelLoadError(
        f"graph {g.name!r}: {node_desc} input {i} reads {name!r}, which no earlier node, "
        "graph input or initializer defines"
    )


def _make_names_unique(g: Graph) -> None:
    seen: set[str] = set()
    for n in g.nodes:
        base = n.name
        k = 1
        while n.name in seen:
            n.name = f"{base}__{k}"
            k += 1
        seen.add(n.name)
