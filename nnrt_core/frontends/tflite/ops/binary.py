"""ADD, SUB, MUL, DIV (with fused activations), MAXIMUM, MINIMUM, SQUARED_DIFFERENCE."""
from __future__ import annotations

import tflite

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.common import finish, layout_inputs
from nnrt_core.frontends.tflite.ops.registry import register

__all__ = ["arithmetic", "min_max", "squared_difference"]

_ONNX = {"ADD": ("Add", tflite.AddOptions), "SUB": ("Sub", tflite.SubOptions),
         "MUL": ("Mul", tflite.MulOptions), "DIV": ("Div", tflite.DivOptions),
         "MAXIMUM": ("Max", None), "MINIMUM": ("Min", None)}


@register("ADD", "SUB", "MUL", "DIV")
def arithmetic(ctx: OpContext) -> None:
    op, cls = _ONNX[ctx.op_name]
    o = ctx.options(cls)
    (a, b), nchw = layout_inputs(ctx, [0, 1])
    dtype, shape = ctx.out_type(0, nchw)
    finish(ctx, ctx.node(op, [a, b], dtype, shape), o.FusedActivationFunction(), nchw)


@register("MAXIMUM", "MINIMUM")
def min_max(ctx: OpContext) -> None:
    (a, b), nchw = layout_inputs(ctx, [0, 1])
    dtype, shape = ctx.out_type(0, nchw)
    ctx.set_out(0, ctx.node(_ONNX[ctx.op_name][0], [a, b], dtype, shape), nchw)


@register("SQUARED_DIFFERENCE")
def squared_difference(ctx: OpContext) -> None:
    (a, b), nchw = layout_inputs(ctx, [0, 1])
    dtype, shape = ctx.out_type(0, nchw)
    d = ctx.node("Sub", [a, b], dtype, shape, hint="diff")
    ctx.set_out(0, ctx.node("Mul", [d, d], dtype, shape), nchw)
