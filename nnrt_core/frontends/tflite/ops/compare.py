"""Comparisons, logical ops and SELECT / SELECT_V2 (element-wise, any layout)."""
from __future__ import annotations

import numpy as np

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.common import layout_inputs
from nnrt_core.frontends.tflite.ops.registry import register
from nnrt_core.ir import DataType

__all__ = ["comparison", "logical", "logical_not", "select"]

_CMP = {"GREATER": "Greater", "GREATER_EQUAL": "GreaterOrEqual", "LESS": "Less", "LESS_EQUAL": "LessOrEqual",
        "EQUAL": "Equal", "NOT_EQUAL": "Equal"}


@register(*_CMP)
def comparison(ctx: OpContext) -> None:
    (a, b), nchw = layout_inputs(ctx, [0, 1])
    dtype, shape = ctx.out_type(0, nchw)
    if dtype != DataType.BOOL:
        raise ctx.fail(f"output type must be BOOL, got {dtype.name}")
    y = ctx.node(_CMP[ctx.op_name], [a, b], dtype, shape, hint="eq" if ctx.op_name == "NOT_EQUAL" else "")
    if ctx.op_name == "NOT_EQUAL":
        y = ctx.node("Not", [y], dtype, shape)
    ctx.set_out(0, y, nchw)


@register("LOGICAL_AND", "LOGICAL_OR")
def logical(ctx: OpContext) -> None:
    (a, b), nchw = layout_inputs(ctx, [0, 1])
    dtype, shape = ctx.out_type(0, nchw)
    ctx.set_out(0, ctx.node("And" if ctx.op_name == "LOGICAL_AND" else "Or", [a, b], dtype, shape), nchw)


@register("LOGICAL_NOT")
def logical_not(ctx: OpContext) -> None:
    (a,), nchw = layout_inputs(ctx, [0])
    dtype, shape = ctx.out_type(0, nchw)
    ctx.set_out(0, ctx.node("Not", [a], dtype, shape), nchw)


@register("SELECT", "SELECT_V2")
def select(ctx: OpContext) -> None:
    """``Where(condition, x, y)``.  SELECT (v1) with a rank-1 condition and higher-rank
    ``x`` picks whole rows: the condition is reshaped to ``[n, 1, ...]`` first."""
    c_shape, x_shape = ctx.info(0).shape, ctx.info(1).shape
    if ctx.info(0).dtype != DataType.BOOL:
        raise ctx.fail(f"condition must be BOOL, got {ctx.info(0).dtype.name}")
    if ctx.op_name == "SELECT" and len(c_shape) == 1 and len(x_shape) > 1:
        if c_shape[0] != x_shape[0]:
            raise ctx.fail(f"rank-1 condition {list(c_shape)} must match the first dimension of {list(x_shape)}")
        rows = [c_shape[0]] + [1] * (len(x_shape) - 1)
        cond = ctx.node("Reshape", [ctx.x(0), ctx.constant(np.array(rows, np.int64), "rows")], DataType.BOOL, rows,
                        hint="rows")
        dtype, shape = ctx.out_type(0)
        ctx.set_out(0, ctx.node("Where", [cond, ctx.x(1), ctx.x(2)], dtype, shape))
        return
    (c, a, b), nchw = layout_inputs(ctx, [0, 1, 2])
    dtype, shape = ctx.out_type(0, nchw)
    ctx.set_out(0, ctx.node("Where", [c, a, b], dtype, shape), nchw)
