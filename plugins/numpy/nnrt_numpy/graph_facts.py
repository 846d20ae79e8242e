"""Compile-time facts about IR values shared by fusion and program planning."""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from nnrt_core.ir import DataType, Graph, TensorType, Value

__all__ = ["value_dtype", "is_static_shape", "value_readers"]


def value_dtype(v: Value | None) -> np.dtype | None:
    """The numpy dtype of a tensor value, or None (no value, not a tensor, no numpy type)."""
    if v is None or not isinstance(v.type, TensorType):
        return None
    return _numpy_dtype(v.type.dtype)


@functools.lru_cache(maxsize=None)
def _numpy_dtype(dtype: DataType) -> np.dtype | None:
    """``np.dtype`` of an element type (made once per type: fusion and planning ask per value)."""
    try:
        return np.dtype(dtype.numpy)
    except TypeError:
        return None


def is_static_shape(shape: Any) -> bool:
    """Whether ``shape`` is known and every dimension is a plain int."""
    return shape is not None and all(isinstance(d, int) and not isinstance(d, bool) for d in shape)


def value_readers(graph: Graph) -> dict[int, list]:
    """Who reads each value of ``graph`` (keyed by ``id``): nodes (once per
    input position), and ``None`` for sub-graph reads and graph outputs."""
    readers: dict[int, list] = {}
    for n in graph.nodes:
        for v in n.inputs:
            if v is not None:
                readers.setdefault(id(v), []).append(n)
        for v in n.outer_inputs():
            readers.setdefault(id(v), []).append(None)
    for v in graph.outputs:
        readers.setdefault(id(v), []).append(None)
    return readers
