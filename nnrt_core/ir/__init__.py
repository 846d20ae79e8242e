"""nnrt's intermediate representation: protobuf-free graphs of typed values."""
from __future__ import annotations

from nnrt_core.ir.attributes import Attribute, AttrKind
from nnrt_core.ir.dtypes import DataType
from nnrt_core.ir.graph import Graph, Model, Node, Value
from nnrt_core.ir.types import Dim, OptionalType, SequenceType, TensorType, ValueType

__all__ = [
    "Attribute",
    "AttrKind",
    "DataType",
    "Dim",
    "Graph",
    "Model",
    "Node",
    "OptionalType",
    "SequenceType",
    "TensorType",
    "Value",
    "ValueType",
]
