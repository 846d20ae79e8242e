"""CONV_2D and DEPTHWISE_CONV_2D -> Conv (NCHW, OIHW weights converted at import)."""
from __future__ import annotations

import tflite

from nnrt_core.frontends.tflite.context import NCHW, OpContext
from nnrt_core.frontends.tflite.ops.common import conv_pads, finish
from nnrt_core.frontends.tflite.ops.registry import register

__all__ = ["conv_2d", "depthwise_conv_2d"]

_DEPTHWISE = (3, 0, 1, 2)  # 1HW(C*M) -> (C*M)1HW


def _conv(ctx: OpContext, o: object, perm: tuple[int, ...], group: int, kernel: list[int]) -> None:
    x_info = ctx.info(0)
    if len(x_info.shape) != 4:
        raise ctx.fail(f"input must be 4-D NHWC, got shape {list(x_info.shape)}")
    strides = [o.StrideH(), o.StrideW()]
    dil = [o.DilationHFactor(), o.DilationWFactor()]
    if min(strides + dil) < 1:
        raise ctx.fail(f"strides {strides} and dilations {dil} must be positive")
    pads = conv_pads(ctx, o.Padding(), x_info.shape[1:3], kernel, strides, dil)
    inputs = [ctx.x_nchw(0), ctx.weight(1, perm)]
    if ctx.has(2):
        inputs.append(ctx.weight(2))
    dtype, shape = ctx.out_type(0, nchw=True)
    y = ctx.node("Conv", inputs, dtype, shape, {"strides": strides, "dilations": dil, "pads": pads,
                                                "group": group, "kernel_shape": kernel})
    finish(ctx, y, o.FusedActivationFunction(), nchw=True)


@register("CONV_2D")
def conv_2d(ctx: OpContext) -> None:
    o = ctx.options(tflite.Conv2DOptions)
    w = ctx.info(1).shape
    c_in = ctx.info(0).shape[-1]
    if len(w) != 4 or w[3] < 1 or c_in % w[3] or w[0] % (c_in // w[3]):
        raise ctx.fail(f"filter shape {list(w)} (OHWI) does not fit {c_in} input channels")
    _conv(ctx, o, NCHW, c_in // w[3], [w[1], w[2]])


@register("DEPTHWISE_CONV_2D")
def depthwise_conv_2d(ctx: OpContext) -> None:
    o = ctx.options(tflite.DepthwiseConv2DOptions)
    w = ctx.info(1).shape
    c_in = ctx.info(0).shape[-1]
    if len(w) != 4 or w[0] != 1 or c_in < 1 or w[3] % c_in:
        raise ctx.fail(f"filter shape {list(w)} (1HW(C*M)) does not fit {c_in} input channels")
    _conv(ctx, o, _DEPTHWISE, c_in, [w[1], w[2]])
