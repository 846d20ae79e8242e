"""TRANSPOSE_CONV -> ConvTranspose (NCHW; OHWI weights -> IOHW at import)."""
from __future__ import annotations

import tflite

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.common import finish, same_pads
from nnrt_core.frontends.tflite.ops.registry import register

__all__ = ["transpose_conv"]

_IOHW = (3, 0, 1, 2)


@register("TRANSPOSE_CONV")
def transpose_conv(ctx: OpContext) -> None:
    """Inputs: output_shape, weights (O,KH,KW,I), input (NHWC), optional bias."""
    o = ctx.options(tflite.TransposeConvOptions)
    out_shape = ctx.const_ints(0)
    w, x = ctx.info(1).shape, ctx.info(2).shape
    if len(x) != 4 or len(w) != 4 or len(out_shape) != 4 or w[3] != x[3] or out_shape[3] != w[0]:
        raise ctx.fail(f"input {list(x)}, weights {list(w)} (OHWI) and output shape {out_shape} do not fit")
    strides = [o.StrideH(), o.StrideW()]
    if min(strides) < 1 or o.Padding() not in (0, 1):
        raise ctx.fail(f"strides {strides} must be positive and padding SAME or VALID")
    pads_b, pads_e, extra = [], [], []
    for k in range(2):
        size, kernel, stride = out_shape[1 + k], w[1 + k], strides[k]
        begin = same_pads(size, kernel, stride)[0] if o.Padding() == 0 else 0
        end = stride * (x[1 + k] - 1) + kernel - begin - size
        pads_b.append(begin)
        pads_e.append(max(end, 0))
        extra.append(max(-end, 0))
    inputs = [ctx.x_nchw(2), ctx.weight(1, _IOHW)]
    if ctx.has(3):
        inputs.append(ctx.weight(3))
    dtype, out = ctx.out_type(0, nchw=True)
    y = ctx.node("ConvTranspose", inputs, dtype, out, {"strides": strides, "pads": pads_b + pads_e,
                                                         "output_padding": extra, "kernel_shape": [w[1], w[2]]})
    finish(ctx, y, o.FusedActivationFunction(), nchw=True)
