"""FULLY_CONNECTED -> Gemm (weights used as stored, transB=1) plus reshapes."""
from __future__ import annotations

import numpy as np
import tflite

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.common import finish
from nnrt_core.frontends.tflite.ops.registry import register

__all__ = ["fully_connected"]


@register("FULLY_CONNECTED")
def fully_connected(ctx: OpContext) -> None:
    o = ctx.options(tflite.FullyConnectedOptions)
    if o.WeightsFormat() != 0:
        raise ctx.fail("shuffled weights formats are not supported (DEFAULT only)")
    x_shape, w_shape = ctx.info(0).shape, ctx.info(1).shape
    if len(w_shape) != 2 or w_shape[1] < 1:
        raise ctx.fail(f"weights must be 2-D (out, in), got shape {list(w_shape)}")
    k = w_shape[1]
    total = int(np.prod(x_shape)) if x_shape else 1
    if total % k:
        raise ctx.fail(f"input shape {list(x_shape)} does not divide into rows of {k} (weights {list(w_shape)})")
    dtype, out_shape = ctx.out_type(0)
    x = ctx.x(0)
    rows = total // k
    if list(x_shape) != [rows, k]:
        x = ctx.node("Reshape", [x, ctx.constant(np.array([rows, k], np.int64), "rows")], x.dtype, [rows, k],
                     hint="flatten")
    inputs = [x, ctx.weight(1)]
    if ctx.has(2):
        inputs.append(ctx.weight(2))
    y = ctx.node("Gemm", inputs, dtype, [rows, w_shape[0]], {"transB": 1}, hint="gemm")
    if list(out_shape) != [rows, w_shape[0]]:
        y = ctx.node("Reshape", [y, ctx.constant(np.array(out_shape, np.int64), "shape")], dtype, out_shape)
    finish(ctx, y, o.FusedActivationFunction(), nchw=False)
