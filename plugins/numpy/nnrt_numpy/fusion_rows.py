"""Attention-score tails for :mod:`nnrt_numpy.fusion`: ``Div`` by a constant and a last-axis
``Softmax``, so that ``MatMul(q, k^T) -> Div(sqrt d) -> Add(mask) -> Softmax`` (how BERT-style
encoders are exported) runs as one step: the scaling and the mask (a residual-style tensor ``Add``
that broadcasts onto the scores, :func:`nnrt_numpy.fusion_shapes.may_broadcast`) in place on the
scores, then the row softmax of :mod:`nnrt_numpy.ops.nn.softmax` into a fresh array.

The ``Div`` runs the same float division as the unfused node (bit for bit); the softmax is the
Softmax kernel's own function.
"""
from __future__ import annotations

import numpy as np

from nnrt_core.ir import Node, Value

from nnrt_numpy.fusion_shapes import fits
from nnrt_numpy.graph_facts import value_dtype

__all__ = ["row_tail", "apply_row", "ROW_KINDS"]

#: the tail kinds made here
ROW_KINDS = frozenset({"div", "softmax"})


def row_tail(node: Node, y: Value, ydt: np.dtype, yshape: tuple) -> tuple | None:
    """The tail op of ``node`` reading the chain value ``y`` (float ``ydt``, declared ``yshape``):
    ``("div", constant)`` for ``Div(y, c)`` with a constant ``c`` that broadcasts onto ``yshape``
    without growing it, ``("softmax", fn)`` for a Softmax over the last axis; otherwise None."""
    if node.op_type == "Div" and node.opset >= 7 and len(node.inputs) == 2 and node.inputs[0] is y:
        c = node.inputs[1]
        if c is None or c is y or c.const is None or value_dtype(c) != ydt or not fits(c.const.shape, yshape):
            return None
        return ("div", np.ascontiguousarray(c.const, dtype=ydt))
    if node.op_type == "Softmax" and len(node.inputs) == 1:
        a = node.attributes.get("axis")
        axis = int(a.value) if a is not None else (-1 if node.opset >= 13 else 1)
        r = len(yshape)
        # before opset 13 the input is flattened to 2-D at ``axis``: the last axis alone when axis = r - 1
        if r < 1 or axis not in (-1, r - 1):
            return None
        from nnrt_numpy.ops.nn.softmax import softmax  # (at compile: kernel modules load with their ops)
        return ("softmax", softmax)
    return None


def apply_row(op: tuple, y: np.ndarray) -> np.ndarray:
    """Run a tail made here on the chain's array ``y``; returns the result (``y`` itself for ``div``,
    a fresh array for ``softmax``)."""
    if op[0] == "div":
        np.divide(y, op[1], out=y)
        return y
    return op[1](y, y.ndim - 1)
