"""Node attributes: their kinds (numbered like ONNX's) and values."""
from __future__ import annotations

import enum
from typing import Any

from nnrt_core.record import Record

__all__ = ["AttrKind", "Attribute"]


class AttrKind(enum.IntEnum):
    """Attribute kinds, numbered like ONNX's ``AttributeProto.AttributeType``."""

    UNDEFINED = 0
    FLOAT = 1
    INT = 2
    STRING = 3
    TENSOR = 4
    GRAPH = 5
    FLOATS = 6
    INTS = 7
    STRINGS = 8
    TENSORS = 9
    GRAPHS = 10
    SPARSE_TENSOR = 11
    SPARSE_TENSORS = 12
    TYPE_PROTO = 13
    TYPE_PROTOS = 14


class Attribute(Record):
    """A node attribute.  ``value`` is a Python int/float/str, a numpy array
    (TENSOR), a :class:`~nnrt_core.ir.graph.Graph` (GRAPH), a
    :class:`~nnrt_core.ir.types.ValueType` (TYPE_PROTO) or a list of those."""

    __slots__ = ("name", "kind", "value", "ref_attr_name")
    name: str
    kind: AttrKind
    value: Any
    ref_attr_name: str | None  # attribute reference inside functions

    def __init__(self, name: str, kind: AttrKind, value: Any, ref_attr_name: str | None = None) -> None:
        self.name = name
        self.kind = kind
        self.value = value
        self.ref_attr_name = ref_attr_name

    def graphs(self) -> list[Any]:
        """The sub-graphs (:class:`~nnrt_core.ir.graph.Graph` objects) this attribute holds."""
        if self.kind == AttrKind.GRAPH:
            return [self.value]
        if self.kind == AttrKind.GRAPHS:
            return list(self.value)
        return []
