"""AVERAGE_POOL_2D and MAX_POOL_2D -> AveragePool / MaxPool (NCHW)."""
from __future__ import annotations

import tflite

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.common import conv_pads, finish
from nnrt_core.frontends.tflite.ops.registry import register

__all__ = ["pool_2d"]


@register("AVERAGE_POOL_2D", "MAX_POOL_2D")
def pool_2d(ctx: OpContext) -> None:
    o = ctx.options(tflite.Pool2DOptions)
    shape = ctx.info(0).shape
    if len(shape) != 4:
        raise ctx.fail(f"input must be 4-D NHWC, got shape {list(shape)}")
    kernel, strides = [o.FilterHeight(), o.FilterWidth()], [o.StrideH(), o.StrideW()]
    if min(kernel + strides) < 1:
        raise ctx.fail(f"filter {kernel} and strides {strides} must be positive")
    pads = conv_pads(ctx, o.Padding(), shape[1:3], kernel, strides)
    op = "MaxPool" if ctx.op_name == "MAX_POOL_2D" else "AveragePool"
    dtype, out = ctx.out_type(0, nchw=True)
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": pads}
    if op == "AveragePool":
        attrs["count_include_pad"] = 0
    y = ctx.node(op, [ctx.x_nchw(0)], dtype, out, attrs)
    finish(ctx, y, o.FusedActivationFunction(), nchw=True)
