"""Element-wise unary operators and activations (layout agnostic: they keep NCHW)."""
from __future__ import annotations

import numpy as np
import tflite

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.common import layout_inputs
from nnrt_core.frontends.tflite.ops.registry import register

__all__ = ["simple_unary", "clipped", "leaky_relu", "rsqrt", "prelu"]

_SIMPLE = {"LOGISTIC": "Sigmoid", "TANH": "Tanh", "RELU": "Relu", "HARD_SWISH": "HardSwish", "ABS": "Abs",
           "NEG": "Neg", "EXP": "Exp", "LOG": "Log", "SQRT": "Sqrt"}


@register(*_SIMPLE)
def simple_unary(ctx: OpContext) -> None:
    (x,), nchw = layout_inputs(ctx, [0])
    dtype, shape = ctx.out_type(0, nchw)
    ctx.set_out(0, ctx.node(_SIMPLE[ctx.op_name], [x], dtype, shape), nchw)


@register("RELU6", "RELU_N1_TO_1", "RELU_0_TO_1")
def clipped(ctx: OpContext) -> None:
    lo, hi = {"RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0), "RELU_0_TO_1": (0.0, 1.0)}[ctx.op_name]
    (x,), nchw = layout_inputs(ctx, [0])
    dtype, shape = ctx.out_type(0, nchw)
    lo_v, hi_v = ctx.constant(np.array(lo, np.float32), "min"), ctx.constant(np.array(hi, np.float32), "max")
    ctx.set_out(0, ctx.node("Clip", [x, lo_v, hi_v], dtype, shape), nchw)


@register("LEAKY_RELU")
def leaky_relu(ctx: OpContext) -> None:
    alpha = ctx.options(tflite.LeakyReluOptions).Alpha()
    (x,), nchw = layout_inputs(ctx, [0])
    dtype, shape = ctx.out_type(0, nchw)
    ctx.set_out(0, ctx.node("LeakyRelu", [x], dtype, shape, {"alpha": float(alpha)}), nchw)


@register("RSQRT")
def rsqrt(ctx: OpContext) -> None:
    (x,), nchw = layout_inputs(ctx, [0])
    dtype, shape = ctx.out_type(0, nchw)
    s = ctx.node("Sqrt", [x], dtype, shape, hint="sqrt")
    ctx.set_out(0, ctx.node("Reciprocal", [s], dtype, shape), nchw)


@register("PRELU")
def prelu(ctx: OpContext) -> None:
    (x, alpha), nchw = layout_inputs(ctx, [0, 1])
    dtype, shape = ctx.out_type(0, nchw)
    ctx.set_out(0, ctx.node("PRelu", [x, alpha], dtype, shape), nchw)
