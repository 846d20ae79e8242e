"""The initializers of a serialized ``ModelProto``, read without ``onnx``.

A compiled session file's ONNX Runtime partition is ONNX bytes whose large
weights point into a region after them; loading it needs only each
initializer's name, element type, dimensions and external-data entries.
This reads those fields from the protobuf wire format (the encoding
protobuf documents: https://protobuf.dev/programming-guides/encoding/), so
that loading a ``.nnrt`` file imports neither ``onnx`` nor protobuf's
descriptors.  Protobuf's merge rules hold: a message field that occurs more
than once is merged (repeated fields concatenated, the last scalar wins).
Malformed bytes raise :class:`ValueError`; every length is checked against
the buffer before it is used.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from nnrt_core.ir.dtypes import DataType

__all__ = ["EXTERNAL", "Entry", "WireTensor", "nested_external_tensors", "read_initializers", "tensor_dtype_to_np_dtype"]

#: ``TensorProto.DataLocation.EXTERNAL``
EXTERNAL = 1
_MODEL_GRAPH, _GRAPH_INITIALIZER = 7, 5
_GRAPH_NODE, _GRAPH_SPARSE_INITIALIZER, _NODE_ATTRIBUTE = 1, 15, 5
#: AttributeProto fields holding tensors (t, tensors), graphs (g, graphs) and sparse tensors
_A_TENSOR, _A_GRAPH, _A_TENSORS, _A_GRAPHS, _A_SPARSE, _A_SPARSES = 5, 6, 10, 11, 22, 23
_SPARSE_VALUES, _SPARSE_INDICES = 1, 2
_T_DIMS, _T_DATA_TYPE, _T_NAME, _T_EXTERNAL_DATA, _T_DATA_LOCATION = 1, 2, 8, 13, 14
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class Entry:
    """One ``StringStringEntryProto`` (``key``, ``value``)."""

    __slots__ = ("key", "value")

    def __init__(self, key: str = "", value: str = "") -> None:
        self.key, self.value = key, value


class WireTensor:
    """The fields of a ``TensorProto`` a weights region needs (the same names)."""

    __slots__ = ("name", "data_type", "dims", "data_location", "external_data")

    def __init__(self) -> None:
        self.name = ""
        self.data_type = 0
        self.dims: list[int] = []
        self.data_location = 0
        self.external_data: list[Entry] = []


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than 10 bytes")


def _signed(v: int, bits: int = 64) -> int:
    v &= (1 << 64) - 1
    v = v - (1 << 64) if v >= 1 << 63 else v
    return v if bits == 64 else ((v + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))


def _fields(buf: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value) of every field of one message."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError("field number 0")
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
            yield number, wire, value
        elif wire == _LEN:
            n, pos = _varint(buf, pos)
            if n > len(buf) - pos:
                raise ValueError(f"field {number}: length {n} past the end of its message")
            yield number, wire, buf[pos:pos + n]
            pos += n
        elif wire in (_I64, _I32):
            n = 8 if wire == _I64 else 4
            if n > len(buf) - pos:
                raise ValueError(f"field {number}: truncated fixed-width value")
            yield number, wire, int.from_bytes(buf[pos:pos + n], "little")
            pos += n
        else:
            raise ValueError(f"field {number}: unsupported wire type {wire}")


def _text(value: int | memoryview) -> str:
    if not isinstance(value, memoryview):
        raise ValueError("a string field is not length-delimited")
    return bytes(value).decode("utf-8")


def _tensor(buf: memoryview, t: WireTensor) -> None:
    for number, wire, value in _fields(buf):
        if number == _T_DIMS:
            if isinstance(value, memoryview):  # packed
                pos = 0
                while pos < len(value):
                    d, pos = _varint(value, pos)
                    t.dims.append(_signed(d))
            elif wire == _VARINT:
                t.dims.append(_signed(value))
        elif number == _T_DATA_TYPE and wire == _VARINT:
            t.data_type = _signed(int(value), 32)
        elif number == _T_NAME:
            t.name = _text(value)
        elif number == _T_DATA_LOCATION and wire == _VARINT:
            t.data_location = _signed(int(value), 32)
        elif number == _T_EXTERNAL_DATA:
            if not isinstance(value, memoryview):
                raise ValueError("external_data is not a message")
            entry = Entry()
            for n2, _, v2 in _fields(value):
                if n2 == 1:
                    entry.key = _text(v2)
                elif n2 == 2:
                    entry.value = _text(v2)
            t.external_data.append(entry)


def read_initializers(model: bytes | memoryview) -> list[WireTensor]:
    """The ``graph.initializer`` tensors of serialized ``ModelProto`` bytes
    (their name, data type, dims, data location and external data only)."""
    buf = memoryview(model).cast("B")
    out: list[WireTensor] = []
    for number, _, graph in _fields(buf):
        if number != _MODEL_GRAPH:
            continue
        if not isinstance(graph, memoryview):
            raise ValueError("graph is not a message")
        for n2, _, tensor in _fields(graph):
            if n2 == _GRAPH_INITIALIZER:
                if not isinstance(tensor, memoryview):
                    raise ValueError("an initializer is not a message")
                t = WireTensor()
                _tensor(tensor, t)
                out.append(t)
    return out


def nested_external_tensors(model: bytes | memoryview) -> list[str]:
    """The names of the tensors of serialized ``ModelProto`` bytes that hold
    external data anywhere but in the main graph's ``initializer`` list: in
    sub-graphs (``If`` / ``Loop`` / ``Scan`` bodies), node attributes or sparse
    initializers.  :func:`read_initializers` does not see those, so a weights
    region cannot be handed over for them."""
    buf = memoryview(model).cast("B")
    out: list[str] = []
    for number, _, graph in _fields(buf):
        if number == _MODEL_GRAPH:
            if not isinstance(graph, memoryview):
                raise ValueError("graph is not a message")
            _graph_externals(graph, out, top=True)
    return out


def _graph_externals(graph: memoryview, out: list[str], top: bool) -> None:
    for number, _, value in _fields(graph):
        if not isinstance(value, memoryview):
            continue
        if number == _GRAPH_INITIALIZER and not top:
            _tensor_external(value, out)
        elif number == _GRAPH_SPARSE_INITIALIZER:
            _sparse_externals(value, out)
        elif number == _GRAPH_NODE:
            for n2, _, attr in _fields(value):
                if n2 == _NODE_ATTRIBUTE and isinstance(attr, memoryview):
                    _attribute_externals(attr, out)


def _attribute_externals(attr: memoryview, out: list[str]) -> None:
    for number, _, value in _fields(attr):
        if not isinstance(value, memoryview):
            continue
        if number in (_A_TENSOR, _A_TENSORS):
            _tensor_external(value, out)
        elif number in (_A_GRAPH, _A_GRAPHS):
            _graph_externals(value, out, top=False)
        elif number in (_A_SPARSE, _A_SPARSES):
            _sparse_externals(value, out)


def _sparse_externals(sparse: memoryview, out: list[str]) -> None:
    for number, _, value in _fields(sparse):
        if number in (_SPARSE_VALUES, _SPARSE_INDICES) and isinstance(value, memoryview):
            _tensor_external(value, out)


def _tensor_external(buf: memoryview, out: list[str]) -> None:
    t = WireTensor()
    _tensor(buf, t)
    if t.data_location == EXTERNAL:
        out.append(t.name)


def tensor_dtype_to_np_dtype(elem: int) -> np.dtype:
    """The NumPy type of ONNX element type ``elem`` (``onnx.helper.tensor_dtype_to_np_dtype``;
    the IR's element types are ONNX's)."""
    try:
        return DataType(elem).numpy
    except ValueError:
        raise ValueError(f"unknown ONNX element type {elem}") from None
