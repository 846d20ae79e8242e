"""ONNX file / bytes / ``ModelProto`` -> nnrt IR.

Parsing, checking, function inlining and shape inference are done by the
``onnx`` package; this module only translates protos into IR objects and adds
the safety checks an untrusted file needs: external data must stay inside the
model's folder, and no tensor may claim more bytes than its data holds or than
``MAX_TENSOR_BYTES``.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.inliner
from onnx import numpy_helper

from nnrt_core.errors import ModelLoadError
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

__all__ = ["load_onnx", "MAX_TENSOR_BYTES", "parse_model_proto"]

log = logging.getLogger("nnrt.onnx")

#: Largest tensor (bytes) a model may declare; larger ones are refused before allocation.
MAX_TENSOR_BYTES = int(os.environ.get("NNRT_MAX_TENSOR_BYTES", 8 << 30))

ModelSource = str | os.PathLike | bytes | onnx.ModelProto


def parse_model_proto(source: ModelSource) -> tuple[onnx.ModelProto, str | None]:
    """Parse ``source`` into a ``ModelProto`` with external data resolved.

    Returns the proto and the folder external data was resolved against.
    """
    base_dir: str | None = None
    if isinstance(source, onnx.ModelProto):
        proto = source
    elif isinstance(source, (bytes, bytearray, memoryview)):
        proto = _parse_bytes(bytes(source), "<bytes>")
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise ModelLoadError(f"model file {str(path)!r} does not exist or is not a file")
        base_dir = str(path.resolve().parent)
        proto = _parse_bytes(path.read_bytes(), str(path))
    else:
        raise ModelLoadError(
            f"cannot load a model from {type(source).__name__}; expected a path, bytes, "
            "onnx.ModelProto or nnrt_core.ir.Model"
        )
    _load_external_data(proto, base_dir)
    return proto, base_dir


def load_onnx(
    source: ModelSource,
    *,
    check: bool = True,
    infer_shapes: bool = True,
) -> Model:
    """Load an ONNX model into the IR (see module docstring)."""
    proto, base_dir = parse_model_proto(source)
    if check:
        try:
            onnx.checker.check_model(proto)
        except (onnx.checker.ValidationError, ValueError) as e:
            raise ModelLoadError(f"ONNX model is invalid: {_first_line(e)}") from e
    if proto.functions:
        try:
            proto = onnx.inliner.inline_local_functions(proto)
        except Exception as e:  # pragma: no cover - depends on onnx internals
            raise ModelLoadError(f"could not inline the model's local functions: {_first_line(e)}") from e
    if infer_shapes:
        try:
            proto = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
        except Exception as e:
            log.warning("ONNX shape inference failed, continuing without it: %s", _first_line(e))
    model = _ProtoConverter().model(proto)
    model.base_dir = base_dir
    return model


# ----------------------------------------------------------------- parsing
def _parse_bytes(data: bytes, what: str) -> onnx.ModelProto:
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as e:
        raise ModelLoadError(f"{what} is not a valid ONNX protobuf: {_first_line(e)}") from e
    if not proto.HasField("graph"):
        raise ModelLoadError(f"{what} holds no ONNX graph (is it an ONNX model?)")
    return proto


def _all_tensors(proto: onnx.ModelProto):
    def from_graph(g: onnx.GraphProto):
        yield from g.initializer
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    yield a.t
                elif a.type == onnx.AttributeProto.TENSORS:
                    yield from a.tensors
                elif a.type == onnx.AttributeProto.GRAPH:
                    yield from from_graph(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    for g2 in a.graphs:
                        yield from from_graph(g2)

    yield from from_graph(proto.graph)
    for f in proto.functions:
        for n in f.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    yield a.t


def _load_external_data(proto: onnx.ModelProto, base_dir: str | None) -> None:
    """Read external tensor data, refusing paths outside ``base_dir``."""
    for t in _all_tensors(proto):
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in t.external_data}
        where = f"tensor {t.name!r}"
        if base_dir is None:
            raise ModelLoadError(
                f"{where} stores its data in an external file, which needs the model to be loaded "
                "from a path (its folder locates the data)"
            )
        location = info.get("location", "")
        if not location or os.path.isabs(location):
            raise ModelLoadError(f"{where}: external data location {location!r} must be a relative path")
        root = os.path.realpath(base_dir)
        path = os.path.realpath(os.path.join(root, location))
        if os.path.commonpath([root, path]) != root:
            raise ModelLoadError(
                f"{where}: external data path {location!r} escapes the model folder {root!r}; refused"
            )
        if not os.path.isfile(path):
            raise ModelLoadError(f"{where}: external data file {location!r} not found in {root!r}")
        size = os.path.getsize(path)
        try:
            offset = int(info.get("offset", 0))
            length = int(info["length"]) if "length" in info else size - offset
        except ValueError as e:
            raise ModelLoadError(f"{where}: bad external data offset/length: {e}") from e
        expected = _declared_bytes(t)
        if offset < 0 or length < 0 or offset + length > size:
            raise ModelLoadError(
                f"{where}: external data range [{offset}, {offset + length}) is outside "
                f"{location!r} ({size} bytes)"
            )
        if expected is not None and length != expected:
            raise ModelLoadError(
                f"{where}: declares {expected} bytes of data but external data holds {length}"
            )
        with open(path, "rb") as f:
            f.seek(offset)
            t.raw_data = f.read(length)
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT


def _declared_bytes(t: onnx.TensorProto) -> int | None:
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
    packed = dtype in _PACKED_TYPES  # sub-byte types: several elements per byte
    nbytes = n if packed else n * (dtype.itemsize if dtype != DataType.UNDEFINED else 1)
    if nbytes > MAX_TENSOR_BYTES:
        raise ModelLoadError(
            f"tensor {t.name!r} declares shape {list(t.dims)} ({nbytes} bytes), above the "
            f"limit of {MAX_TENSOR_BYTES} bytes (NNRT_MAX_TENSOR_BYTES); refused"
        )
    return None if packed else nbytes


_PACKED_TYPES = frozenset(
    {DataType.INT4, DataType.UINT4, DataType.FLOAT4E2M1, DataType.INT2, DataType.UINT2,
     DataType.FLOAT6E2M3, DataType.FLOAT6E3M2}
)


def tensor_to_array(t: onnx.TensorProto) -> np.ndarray:
    """Decode a ``TensorProto``, refusing inconsistent or oversized data."""
    declared = _declared_bytes(t)
    if t.HasField("raw_data") and declared is not None and len(t.raw_data) != declared:
        raise ModelLoadError(
            f"tensor {t.name!r} declares shape {list(t.dims)} ({declared} bytes) "
            f"but holds {len(t.raw_data)} bytes of data"
        )
    try:
        arr = numpy_helper.to_array(t)
    except Exception as e:
        raise ModelLoadError(f"tensor {t.name!r} could not be decoded: {_first_line(e)}") from e
    if arr.dtype == object:
        arr = np.array([x.decode("utf-8") if isinstance(x, bytes) else x for x in arr.flat],
                       dtype=object).reshape(arr.shape)
    return arr


# --------------------------------------------------------------- conversion
def type_from_proto(tp: onnx.TypeProto) -> ValueType | None:
    kind = tp.WhichOneof("value")
    if kind == "tensor_type" or kind == "sparse_tensor_type":
        tt = getattr(tp, kind)
        shape = None
        if tt.HasField("shape"):
            shape = tuple(
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim
            )
        try:
            dtype = DataType(tt.elem_type)
        except ValueError:
            dtype = DataType.UNDEFINED
        return TensorType(dtype, shape)
    if kind == "sequence_type":
        return SequenceType(type_from_proto(tp.sequence_type.elem_type))
    if kind == "optional_type":
        return OptionalType(type_from_proto(tp.optional_type.elem_type))
    return None


class _ProtoConverter:
    """Translates protos into IR, resolving names through nested scopes."""

    def model(self, proto: onnx.ModelProto) -> Model:
        opsets = {(o.domain or ""): o.version for o in proto.opset_import}
        graph = self.graph(proto.graph, opsets, parent=None, scope=[])
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
        gp: onnx.GraphProto,
        opsets: dict[str, int],
        parent: Graph | None,
        scope: list[dict[str, Value]],
    ) -> Graph:
        g = Graph(gp.name or "graph", opset_imports=opsets if parent is None else {}, parent=parent,
                  doc=gp.doc_string)
        local: dict[str, Value] = {}
        types = {vi.name: type_from_proto(vi.type) for vi in gp.value_info}
        for vi in gp.output:
            types.setdefault(vi.name, type_from_proto(vi.type))
        for t in gp.initializer:
            v = Value(t.name, const=tensor_to_array(t))
            g.add_initializer(v)
            local[t.name] = v
        for vi in gp.input:
            if vi.name in local:
                # IR < 4 models list initializers as inputs too; we keep them as constants
                continue
            v = Value(vi.name, type_from_proto(vi.type))
            g.inputs.append(v)
            local[vi.name] = v
        chain = scope + [local]

        def lookup(name: str, node_desc: str, i: int) -> Value:
            for frame in reversed(chain):
                if name in frame:
                    return frame[name]
            raise ModelLoadError(
                f"graph {g.name!r}: {node_desc} input {i} reads {name!r}, which no earlier node, "
                "graph input or initializer defines"
            )

        for k, np_ in enumerate(gp.node):
            desc = f"node {np_.name or f'#{k}'!r} ({np_.op_type})"
            inputs = [lookup(n, desc, i) if n else None for i, n in enumerate(np_.input)]
            outputs = []
            for n in np_.output:
                v = Value(n, types.get(n))
                if n:
                    if n in local:
                        raise ModelLoadError(f"graph {g.name!r}: {desc} redefines value {n!r}")
                    local[n] = v
                outputs.append(v)
            attrs = [self.attribute(a, g, chain, desc) for a in np_.attribute]
            node = Node(
                np_.op_type,
                inputs,
                outputs,
                name=np_.name or f"{np_.op_type}_{k}",
                domain=np_.domain,
                attributes=attrs,
                doc=np_.doc_string,
            )
            g.add_node(node)
        for vi in gp.output:
            v = local.get(vi.name)
            if v is None:
                try:
                    v = lookup(vi.name, "graph output", 0)
                except ModelLoadError:
                    raise ModelLoadError(f"graph {g.name!r}: output {vi.name!r} is never produced") from None
            if v.type is None:
                v.type = type_from_proto(vi.type)
            g.outputs.append(v)
        for name, t in types.items():
            if name in local and local[name].type is None:
                local[name].type = t
        _make_names_unique(g)
        return g

    def attribute(self, a: onnx.AttributeProto, g: Graph, chain: list[dict[str, Value]], desc: str) -> Attribute:
        kind = AttrKind(a.type)
        value: Any
        try:
            if kind == AttrKind.FLOAT:
                value = float(a.f)
            elif kind == AttrKind.INT:
                value = int(a.i)
            elif kind == AttrKind.STRING:
                value = a.s.decode("utf-8", errors="surrogateescape")
            elif kind == AttrKind.TENSOR:
                value = tensor_to_array(a.t)
            elif kind == AttrKind.GRAPH:
                value = self.graph(a.g, {}, g, chain)
            elif kind == AttrKind.FLOATS:
                value = [float(x) for x in a.floats]
            elif kind == AttrKind.INTS:
                value = [int(x) for x in a.ints]
            elif kind == AttrKind.STRINGS:
                value = [s.decode("utf-8", errors="surrogateescape") for s in a.strings]
            elif kind == AttrKind.TENSORS:
                value = [tensor_to_array(t) for t in a.tensors]
            elif kind == AttrKind.GRAPHS:
                value = [self.graph(x, {}, g, chain) for x in a.graphs]
            elif kind == AttrKind.SPARSE_TENSOR:
                value = _sparse_to_dense(a.sparse_tensor)
                kind = AttrKind.TENSOR
            elif kind == AttrKind.TYPE_PROTO:
                value = type_from_proto(a.tp)
            elif kind == AttrKind.TYPE_PROTOS:
                value = [type_from_proto(t) for t in a.type_protos]
            else:
                raise ModelLoadError(f"{desc}: attribute {a.name!r} has unsupported kind {kind.name}")
        except ModelLoadError as e:
            if desc in str(e):
                raise
            raise ModelLoadError(f"{desc}: attribute {a.name!r}: {e}") from e
        return Attribute(a.name, kind, value, ref_attr_name=a.ref_attr_name or None)


def _sparse_to_dense(sp: onnx.SparseTensorProto) -> np.ndarray:
    values = tensor_to_array(sp.values)
    dims = tuple(sp.dims)
    n = int(np.prod(dims)) if dims else 1
    if n * values.dtype.itemsize > MAX_TENSOR_BYTES:
        raise ModelLoadError(f"sparse tensor of shape {dims} is too large to densify")
    dense = np.zeros(n, dtype=values.dtype)
    idx = tensor_to_array(sp.indices).astype(np.int64)
    if idx.ndim == 2:
        idx = np.ravel_multi_index(idx.T, dims)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ModelLoadError("sparse tensor index out of range")
    dense[idx.reshape(-1)] = values.reshape(-1)
    return dense.reshape(dims)


def _make_names_unique(g: Graph) -> None:
    seen: set[str] = set()
    for n in g.nodes:
        base = n.name
        k = 1
        while n.name in seen:
            n.name = f"{base}__{k}"
            k += 1
        seen.add(n.name)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
