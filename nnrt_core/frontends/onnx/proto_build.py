"""Proto builders and tensor <-> array conversion without ``onnx.helper``.

The equivalents of the ``onnx.helper`` / ``onnx.numpy_helper`` functions the
load path uses, over :mod:`~nnrt_core.frontends.onnx.onnx_api`'s classes
(``import onnx`` costs ~55 ms; see there).  They build the same protos
(``tests/test_onnx_api.py`` compares the bytes).  Element types outside
NumPy's own (bfloat16, float8, 4-, 2- and 6-bit types, which need
``ml_dtypes``) are converted by the real ``onnx.numpy_helper``.
"""
from __future__ import annotations

import collections.abc
import numbers
import sys
from typing import Any, Iterable, Sequence

import numpy as np

from nnrt_core.frontends.onnx.onnx_api import P, real_onnx

__all__ = ["from_array", "get_attribute_value", "make_attribute", "make_graph", "make_model", "make_node",
           "make_opsetid", "make_optional_type_proto", "make_sequence_type_proto", "make_tensor_type_proto",
           "make_tensor_value_info", "np_dtype_to_tensor_dtype", "tensor_dtype_to_np_dtype", "to_array"]

T = P.TensorProto
A = P.AttributeProto
#: element type -> (NumPy type, storage field) for the types NumPy has itself
_NATIVE: dict[int, tuple[np.dtype, str]] = {
    T.FLOAT: (np.dtype(np.float32), "float_data"), T.UINT8: (np.dtype(np.uint8), "int32_data"),
    T.INT8: (np.dtype(np.int8), "int32_data"), T.UINT16: (np.dtype(np.uint16), "int32_data"),
    T.INT16: (np.dtype(np.int16), "int32_data"), T.INT32: (np.dtype(np.int32), "int32_data"),
    T.INT64: (np.dtype(np.int64), "int64_data"), T.STRING: (np.dtype(object), "string_data"),
    T.BOOL: (np.dtype(np.bool_), "int32_data"), T.FLOAT16: (np.dtype(np.float16), "int32_data"),
    T.DOUBLE: (np.dtype(np.float64), "double_data"), T.UINT32: (np.dtype(np.uint32), "uint64_data"),
    T.UINT64: (np.dtype(np.uint64), "uint64_data"), T.COMPLEX64: (np.dtype(np.complex64), "float_data"),
    T.COMPLEX128: (np.dtype(np.complex128), "double_data"),
}
_STORAGE = {"float_data": np.float32, "int32_data": np.int32, "int64_data": np.int64, "double_data": np.float64,
            "uint64_data": np.uint64}
_FROM_NP = {dt: elem for elem, (dt, _) in _NATIVE.items()}
_LITTLE = sys.byteorder == "little"


def tensor_dtype_to_np_dtype(elem: int) -> np.dtype:
    """The NumPy type of ONNX element type ``elem`` (``onnx.helper.tensor_dtype_to_np_dtype``)."""
    native = _NATIVE.get(elem)
    return native[0] if native is not None else real_onnx().helper.tensor_dtype_to_np_dtype(elem)


def np_dtype_to_tensor_dtype(dtype: Any) -> int:
    """The ONNX element type of NumPy type ``dtype`` (``onnx.helper.np_dtype_to_tensor_dtype``)."""
    elem = _FROM_NP.get(np.dtype(dtype))
    return elem if elem is not None else int(real_onnx().helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def to_array(t: Any) -> np.ndarray:
    """A ``TensorProto``'s data as an array (``onnx.numpy_helper.to_array``,
    without external data: the loader resolves that first)."""
    native = _NATIVE.get(t.data_type)
    if native is None or t.HasField("segment") or t.data_location == T.EXTERNAL:
        return real_onnx().numpy_helper.to_array(t)  # raises for UNDEFINED and segments, like onnx
    dtype, field = native
    dims = tuple(t.dims)
    if t.data_type == T.STRING:
        return np.array([s.decode("utf-8") for s in t.string_data], dtype=object).reshape(dims)
    if t.HasField("raw_data"):
        if sys.byteorder == "big":
            return np.frombuffer(t.raw_data, dtype=dtype.newbyteorder("<")).astype(dtype).reshape(dims)
        return np.frombuffer(t.raw_data, dtype=dtype).reshape(dims)
    data = getattr(t, field)
    if t.data_type in (T.FLOAT16, T.INT16, T.UINT16):
        return np.array(data, dtype=np.int32).view(np.uint32).astype(np.uint16).reshape(dims).view(dtype)
    if t.data_type == T.BOOL:
        return np.array(data, dtype=np.int32).view(np.uint32).astype(np.uint8).view(dtype).reshape(dims)
    if t.data_type in (T.COMPLEX64, T.COMPLEX128):
        return np.array(data, dtype=_STORAGE[field]).view(dtype).reshape(dims)
    return np.asarray(data, dtype=_STORAGE[field]).astype(dtype).reshape(dims)


def from_array(arr: np.ndarray, name: str | None = None) -> Any:
    """``arr`` as a ``TensorProto`` (``onnx.numpy_helper.from_array``)."""
    elem = _FROM_NP.get(arr.dtype) if _LITTLE and arr.dtype.isnative and arr.dtype != object else None
    if elem is not None:  # the usual numeric array: its bytes as they are
        t = T(data_type=elem, dims=arr.shape, raw_data=arr.tobytes())
        if name:
            t.name = name
        return t
    if arr.dtype != object and not np.issubdtype(arr.dtype, np.str_) and \
            (not arr.dtype.isnative or arr.dtype not in _FROM_NP):
        return real_onnx().numpy_helper.from_array(arr, name)
    t = T()
    t.dims.extend(arr.shape)
    if name:
        t.name = name
    if arr.dtype == object or np.issubdtype(arr.dtype, np.str_):
        t.data_type = T.STRING
        for e in arr.flatten():
            if isinstance(e, str):
                t.string_data.append(e.encode("utf-8"))
            elif isinstance(e, bytes):
                t.string_data.append(e)
            else:
                raise NotImplementedError("Unrecognized object in the object array, expect a string, or array "
                                          f"of bytes: {type(e)}")
        return t
    t.data_type = _FROM_NP[arr.dtype]
    t.raw_data = (arr.astype(arr.dtype.newbyteorder("<")) if sys.byteorder == "big" else arr).tobytes()
    return t


def make_node(op_type: str, inputs: Sequence[str], outputs: Sequence[str], name: str | None = None,
              doc_string: str | None = None, domain: str | None = None, **attrs: Any) -> Any:
    """A ``NodeProto`` (``onnx.helper.make_node``)."""
    node = P.NodeProto()
    node.op_type = op_type
    node.input.extend(inputs)
    node.output.extend(outputs)
    if name:
        node.name = name
    if doc_string:
        node.doc_string = doc_string
    if domain is not None:
        node.domain = domain
    node.attribute.extend(make_attribute(k, v) for k, v in sorted(attrs.items()) if v is not None)
    return node


def make_graph(nodes: Iterable[Any], name: str, inputs: Iterable[Any], outputs: Iterable[Any],
               initializer: Iterable[Any] = (), doc_string: str | None = None, value_info: Iterable[Any] = ()) -> Any:
    """A ``GraphProto`` (``onnx.helper.make_graph``)."""
    g = P.GraphProto()
    g.node.extend(nodes)
    g.name = name
    g.input.extend(inputs)
    g.output.extend(outputs)
    g.initializer.extend(initializer)
    g.value_info.extend(value_info)
    if doc_string:
        g.doc_string = doc_string
    return g


def make_opsetid(domain: str, version: int) -> Any:
    """An ``OperatorSetIdProto``."""
    return P.OperatorSetIdProto(domain=domain, version=version)


def make_model(graph: Any, opset_imports: Iterable[Any]) -> Any:
    """A ``ModelProto`` of the installed onnx's IR version (``onnx.helper.make_model``)."""
    m = P.ModelProto()
    m.ir_version = P.IR_VERSION
    m.graph.CopyFrom(graph)
    m.opset_import.extend(opset_imports)
    return m


def make_tensor_type_proto(elem_type: int, shape: Sequence[str | int | None] | None) -> Any:
    """A tensor ``TypeProto`` (``None`` dims unknown, strings symbolic, ``shape=None``: no shape)."""
    tp = P.TypeProto()
    tt = tp.tensor_type
    tt.elem_type = elem_type
    if shape is not None:
        tt.shape.dim.extend([])  # an explicit (maybe empty) shape
        for d in shape:
            dim = tt.shape.dim.add()
            if isinstance(d, str):
                dim.dim_param = d
            elif isinstance(d, int):
                dim.dim_value = d
            elif d is not None:
                raise ValueError(f"Invalid item in shape: {d}. Needs to be of int or str.")
    return tp


def make_tensor_value_info(name: str, elem_type: int, shape: Sequence[str | int | None] | None) -> Any:
    """A tensor ``ValueInfoProto``."""
    vi = P.ValueInfoProto()
    vi.name = name
    vi.type.CopyFrom(make_tensor_type_proto(elem_type, shape))
    return vi


def make_sequence_type_proto(inner: Any) -> Any:
    """A sequence ``TypeProto`` of ``inner``."""
    tp = P.TypeProto()
    tp.sequence_type.elem_type.CopyFrom(inner)
    return tp


def make_optional_type_proto(inner: Any) -> Any:
    """An optional ``TypeProto`` of ``inner``."""
    tp = P.TypeProto()
    tp.optional_type.elem_type.CopyFrom(inner)
    return tp


def _to_bytes(v: str | bytes) -> bytes:
    return v.encode("utf-8") if isinstance(v, str) else v


_SINGLE = ((P.TensorProto, A.TENSOR, "t"), (P.SparseTensorProto, A.SPARSE_TENSOR, "sparse_tensor"),
           (P.GraphProto, A.GRAPH, "g"), (P.TypeProto, A.TYPE_PROTO, "tp"))
_LISTS = ((numbers.Integral, A.INTS, "ints"), (numbers.Real, A.FLOATS, "floats"), ((str, bytes), A.STRINGS, "strings"),
          (P.TensorProto, A.TENSORS, "tensors"), (P.SparseTensorProto, A.SPARSE_TENSORS, "sparse_tensors"),
          (P.GraphProto, A.GRAPHS, "graphs"), (P.TypeProto, A.TYPE_PROTOS, "type_protos"))


def make_attribute(key: str, value: Any, attr_type: int | None = None) -> Any:
    """An ``AttributeProto`` (``onnx.helper.make_attribute``: the type
    inferred from ``value``, a ``TypeError`` when it differs from ``attr_type``)."""
    attr = P.AttributeProto()
    attr.name = key
    if isinstance(value, numbers.Integral):
        attr.i, attr.type = int(value), A.INT
    elif isinstance(value, numbers.Real):
        attr.f, attr.type = float(value), A.FLOAT
    elif isinstance(value, (str, bytes)):
        attr.s, attr.type = _to_bytes(value), A.STRING
    elif single := next(((k, f) for cls, k, f in _SINGLE if isinstance(value, cls)), None):
        getattr(attr, single[1]).CopyFrom(value)
        attr.type = single[0]
    elif isinstance(value, collections.abc.Iterable):
        value = list(value)
        if not value and attr_type is None:
            raise ValueError(f"Could not infer attribute `{key}` type from empty iterator")
        if attr_type is None:
            types = {type(v) for v in value}
            attr_type = next((k for cls, k, _ in _LISTS if all(issubclass(t, cls) for t in types)), None)
            if attr_type is None:
                raise ValueError("Could not infer the attribute type from the elements of the passed Iterable value.")
        field = next((f for _, k, f in _LISTS if k == attr_type), None)
        if field is None:
            raise TypeError(f"Inferred attribute type 'UNDEFINED'(0) mismatched with specified type "
                            f"'{_name(attr_type)}'({attr_type})")
        getattr(attr, field).extend([_to_bytes(v) for v in value] if field == "strings" else value)
        attr.type = attr_type
    else:
        raise TypeError(f"'{value}' is not an accepted attribute value.")
    if attr_type is not None and attr.type != attr_type:
        raise TypeError(f"Inferred attribute type '{_name(attr.type)}'({attr.type}) mismatched with specified type "
                        f"'{_name(attr_type)}'({attr_type})")
    return attr


def _name(kind: int) -> str:
    try:
        return A.AttributeType.Name(kind)
    except ValueError:
        return str(kind)


def get_attribute_value(attr: Any) -> Any:
    """The Python value of an ``AttributeProto`` (``onnx.helper.get_attribute_value``)."""
    if attr.ref_attr_name:
        raise ValueError(f"Cannot get value of reference attribute: {attr}")
    single = {A.FLOAT: "f", A.INT: "i", A.STRING: "s", A.TENSOR: "t", A.SPARSE_TENSOR: "sparse_tensor",
              A.GRAPH: "g", A.TYPE_PROTO: "tp"}.get(attr.type)
    if single is not None:
        return getattr(attr, single)
    field = next((f for _, k, f in _LISTS if k == attr.type), None)
    if field is not None:
        return list(getattr(attr, field))
    if attr.type == A.UNDEFINED:
        return None
    raise ValueError(f"Unsupported ONNX attribute: {attr}")
