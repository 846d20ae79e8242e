"""MediaPipe's custom ``Convolution2DTransposeBias`` -> ConvTranspose (NCHW, OHWI -> IOHW at import).

The segmentation models that ship with MediaPipe end in this custom operator
(LiteRT registers it among its builtin custom ops).  Its custom options are a
raw C struct: ``int32 padding`` (1 SAME, 2 VALID), ``int32 stride_width``,
``int32 stride_height``; inputs are the NHWC input, OHWI weights and a bias.
The mapper is registered as a custom-operator claim, like a plugin's would be.
"""
from __future__ import annotations

import numpy as np

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.common import same_pads
from nnrt_core.frontends.tflite.ops.registry import mapper_for, register_op
from nnrt_core.frontends.tflite.schema import guarded

__all__ = ["convolution_2d_transpose_bias", "transpose_conv_params"]

_IOHW = (3, 0, 1, 2)
_CUSTOM_OPTIONS = 14  #: vtable offset of Operator.custom_options (field 5)
_PADDINGS = {1: "SAME", 2: "VALID"}


def transpose_conv_params(ctx: OpContext) -> tuple[str, int, int]:
    """(padding, stride_h, stride_w) from the operator's 12-byte custom options."""
    with guarded(f"{ctx.desc} custom options"):
        raw = ctx.op.numbers(_CUSTOM_OPTIONS, np.uint8)
    if raw.size != 12:
        raise ctx.fail(f"custom options must be 12 bytes (padding, stride_w, stride_h as int32), got {raw.size}")
    padding, stride_w, stride_h = (int(v) for v in np.frombuffer(raw.tobytes(), "<i4"))
    if padding not in _PADDINGS or stride_w < 1 or stride_h < 1:
        raise ctx.fail(f"padding {padding} must be 1 (SAME) or 2 (VALID) and strides ({stride_h}, {stride_w}) "
                       "positive")
    return _PADDINGS[padding], stride_h, stride_w


def convolution_2d_transpose_bias(ctx: OpContext) -> None:
    """Inputs: input (NHWC), weights (O, KH, KW, I), bias (O)."""
    padding, sh, sw = transpose_conv_params(ctx)
    x, w, out = ctx.info(0).shape, ctx.info(1).shape, ctx.out_info().shape
    if len(x) != 4 or len(w) != 4 or len(out) != 4 or w[3] != x[3] or out[3] != w[0] or len(ctx.inputs) != 3:
        raise ctx.fail(f"input {list(x)}, weights {list(w)} (OHWI), bias and output {list(out)} do not fit")
    if list(ctx.info(2).shape) != [w[0]]:
        raise ctx.fail(f"bias shape {list(ctx.info(2).shape)} must be [{w[0]}]")
    pads_b, pads_e = [], []
    for k, stride in enumerate((sh, sw)):
        size, kernel = out[1 + k], w[1 + k]
        want = x[1 + k] * stride if padding == "SAME" else (x[1 + k] - 1) * stride + kernel
        if size != want:
            raise ctx.fail(f"declared output {list(out)} does not match {padding} padding (expected {want})")
        begin = same_pads(size, kernel, stride)[0] if padding == "SAME" else 0
        pads_b.append(begin)
        pads_e.append(stride * (x[1 + k] - 1) + kernel - begin - size)
    if min(pads_e) < 0:
        raise ctx.fail(f"output {list(out)} is larger than the transposed convolution produces")
    dtype, shape = ctx.out_type(0, nchw=True)
    y = ctx.node("ConvTranspose", [ctx.x_nchw(0), ctx.weight(1, _IOHW), ctx.weight(2)], dtype, shape,
                 {"strides": [sh, sw], "pads": pads_b + pads_e, "kernel_shape": [w[1], w[2]]})
    ctx.set_out(0, y, nchw=True)


if mapper_for("Convolution2DTransposeBias", True) is None:
    register_op("Convolution2DTransposeBias", convolution_2d_transpose_bias, custom=True)
