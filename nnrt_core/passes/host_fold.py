"""Constant folding's trivial cases computed here, without an evaluator
backend: ``Reshape`` of a constant by a well-formed constant shape, a
``Cast`` that keeps every value exactly (``np.can_cast(..., "safe")``), and
a ``ConstantOfShape`` whose output fits the memory budget.

Exporters write such nodes next to the weights (PP-OCR's cls reshapes its
BatchNorm-like scales, 18 nodes, and casts one int32 shape); evaluating them
on the NumPy backend compiles a partition and, in a fresh process, imports
its kernel modules.  The ONNX ``light`` models build every weight with
``ConstantOfShape`` (20 of SqueezeNet's 39 folds).  Anything outside these cases (``allowzero``, a shape
that does not fit, a narrowing cast...) returns ``None``: the evaluator
decides, with its checks and errors, as before.  A value computed here is a
fresh writeable array, like the evaluator's.
"""
from __future__ import annotations

import math

import numpy as np

from nnrt_core.ir import AttrKind, DataType, Node
from nnrt_core.control import tensor_limit

__all__ = ["host_value"]

#: element types a host cast handles: exact numpy equivalents, no exotic or string types
_PLAIN_KINDS = "biuf"


def host_value(node: Node) -> list[np.ndarray] | None:
    """The output values of ``node`` (its inputs are constants) when it is a
    trivial case, else ``None``."""
    if node.domain not in ("", "ai.onnx") or len(node.outputs) != 1:
        return None
    if node.op_type == "Reshape":
        value = _reshape(node)
    elif node.op_type == "Cast":
        value = _cast(node)
    elif node.op_type == "ConstantOfShape":
        value = _constant_of_shape(node)
    else:
        return None
    return None if value is None else [value]


def _reshape(node: Node) -> np.ndarray | None:
    if len(node.inputs) != 2 or node.inputs[0] is None or node.inputs[1] is None or node.attr("allowzero", 0):
        return None
    x, shape = node.inputs[0].const, node.inputs[1].const
    if not isinstance(x, np.ndarray) or not isinstance(shape, np.ndarray) or x.dtype.kind not in _PLAIN_KINDS:
        return None
    if shape.dtype != np.int64 or shape.ndim != 1:
        return None
    dims = [int(d) for d in shape]
    if any(d < -1 for d in dims) or dims.count(-1) > 1 or any(d == 0 and i >= x.ndim for i, d in enumerate(dims)):
        return None
    dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    if -1 in dims:
        rest = math.prod(d for d in dims if d != -1)  # Python ints: exact, no int64 wrap-around
        if rest == 0 or x.size % rest:
            return None
        dims[dims.index(-1)] = x.size // rest
    if math.prod(dims) != x.size:
        return None
    return np.array(x.reshape(dims), copy=True)


def _cast(node: Node) -> np.ndarray | None:
    if len(node.inputs) != 1 or node.inputs[0] is None or set(node.attributes) - {"to", "saturate"}:
        return None
    x, to = node.inputs[0].const, node.attr("to")
    if not isinstance(x, np.ndarray) or not isinstance(to, int):
        return None
    try:
        dt = DataType(to).numpy
    except (ValueError, TypeError):  # not an element type, or one without a numpy equivalent
        return None
    if x.dtype.kind not in _PLAIN_KINDS or dt.kind not in _PLAIN_KINDS or not np.can_cast(x.dtype, dt, "safe"):
        return None
    return x.astype(dt, copy=True)


def _constant_of_shape(node: Node) -> np.ndarray | None:
    """``np.full`` as the NumPy kernel computes it; a negative or over-budget
    shape, or an unusual ``value``, is left to the evaluator (and its errors)."""
    if (node.opset or 1) < 9 or len(node.inputs) != 1 or node.inputs[0] is None or set(node.attributes) - {"value"}:
        return None
    shape = node.inputs[0].const
    if not isinstance(shape, np.ndarray) or shape.dtype != np.int64 or shape.ndim != 1:
        return None
    attr = node.attributes.get("value")
    if attr is None:
        value = np.zeros((), np.float32)
    elif attr.kind == AttrKind.TENSOR and isinstance(attr.value, np.ndarray) and attr.value.size == 1:
        value = attr.value.reshape(())
    else:
        return None
    dims = [int(d) for d in shape]
    if value.dtype.kind not in _PLAIN_KINDS or any(d < 0 for d in dims):
        return None
    if math.prod(dims) * value.dtype.itemsize > tensor_limit():
        return None
    return np.full(dims, value, dtype=value.dtype)
