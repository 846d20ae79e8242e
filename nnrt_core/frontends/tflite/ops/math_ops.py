"""SIN, COS, FLOOR, CEIL, ROUND, SIGN, SQUARE, POW, FLOOR_DIV, FLOOR_MOD (element-wise, any layout)."""
from __future__ import annotations

import numpy as np

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.common import layout_inputs
from nnrt_core.frontends.tflite.ops.registry import register
from nnrt_core.ir import DataType, Value

__all__ = ["unary_math", "square", "power", "floor_div", "floor_mod"]

_UNARY = {"SIN": "Sin", "COS": "Cos", "FLOOR": "Floor", "CEIL": "Ceil", "ROUND": "Round", "SIGN": "Sign"}
_FLOATS = (DataType.FLOAT, DataType.FLOAT16, DataType.DOUBLE)


@register(*_UNARY)
def unary_math(ctx: OpContext) -> None:
    (x,), nchw = layout_inputs(ctx, [0])
    dtype, shape = ctx.out_type(0, nchw)
    ctx.set_out(0, ctx.node(_UNARY[ctx.op_name], [x], dtype, shape), nchw)


@register("SQUARE")
def square(ctx: OpContext) -> None:
    (x,), nchw = layout_inputs(ctx, [0])
    dtype, shape = ctx.out_type(0, nchw)
    ctx.set_out(0, ctx.node("Mul", [x, x], dtype, shape), nchw)


@register("POW")
def power(ctx: OpContext) -> None:
    (a, b), nchw = layout_inputs(ctx, [0, 1])
    dtype, shape = ctx.out_type(0, nchw)
    ctx.set_out(0, ctx.node("Pow", [a, b], dtype, shape), nchw)


@register("FLOOR_DIV")
def floor_div(ctx: OpContext) -> None:
    """Floats: ``Floor(a / b)``.  Integers: truncating ``Div`` minus one where the
    remainder is non-zero and its sign differs from the divisor's (TFLite rounds down)."""
    (a, b), nchw = layout_inputs(ctx, [0, 1])
    dtype, shape = ctx.out_type(0, nchw)
    if dtype in _FLOATS:
        q = ctx.node("Div", [a, b], dtype, shape, hint="div")
        ctx.set_out(0, ctx.node("Floor", [q], dtype, shape), nchw)
        return
    q = ctx.node("Div", [a, b], dtype, shape, hint="div")
    ctx.set_out(0, _round_down(ctx, a, b, q, dtype, shape), nchw)


def _round_down(ctx: OpContext, a: Value, b: Value, q: Value, dtype: DataType, shape: list[int]) -> Value:
    """``q - 1`` where ``a = q * b + r`` with ``r != 0`` and ``sign(r) != sign(b)``."""
    r = ctx.node("Mod", [a, b], dtype, shape, {"fmod": 1}, hint="rem")
    zero = ctx.constant(np.zeros((), dtype.numpy), "zero")
    nonzero = ctx.node("Not", [ctx.node("Equal", [r, zero], DataType.BOOL, shape, hint="r0")], DataType.BOOL, shape,
                       hint="rnz")
    differ = ctx.node("Xor", [ctx.node("Less", [r, zero], DataType.BOOL, shape, hint="rneg"),
                              ctx.node("Less", [b, zero], DataType.BOOL, shape, hint="bneg")],
                      DataType.BOOL, shape, hint="signs")
    fix = ctx.node("And", [nonzero, differ], DataType.BOOL, shape, hint="fix")
    one = ctx.node("Cast", [fix], dtype, shape, {"to": int(dtype)}, hint="one")
    return ctx.node("Sub", [q, one], dtype, shape)


@register("FLOOR_MOD")
def floor_mod(ctx: OpContext) -> None:
    """``a - floor(a / b) * b`` (the result has the divisor's sign)."""
    (a, b), nchw = layout_inputs(ctx, [0, 1])
    dtype, shape = ctx.out_type(0, nchw)
    if dtype in _FLOATS:
        q = ctx.node("Floor", [ctx.node("Div", [a, b], dtype, shape, hint="div")], dtype, shape, hint="floor")
    else:
        q = _round_down(ctx, a, b, ctx.node("Div", [a, b], dtype, shape, hint="div"), dtype, shape)
    ctx.set_out(0, ctx.node("Sub", [a, ctx.node("Mul", [q, b], dtype, shape, hint="qb")], dtype, shape), nchw)
