"""SOFTMAX (beta) -> Softmax over the last axis (channel axis 1 when the input is NCHW)."""
from __future__ import annotations

import numpy as np
import tflite

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.registry import register

__all__ = ["softmax"]


@register("SOFTMAX")
def softmax(ctx: OpContext) -> None:
    beta = float(ctx.options(tflite.SoftmaxOptions).Beta())
    nchw = ctx.is_nchw(0)
    x = ctx.x_nchw(0) if nchw else ctx.x(0)
    dtype, shape = ctx.out_type(0, nchw)
    if beta != 1.0:
        x = ctx.node("Mul", [x, ctx.constant(np.array(beta, np.float32), "beta")], dtype, shape, hint="beta")
    ctx.set_out(0, ctx.node("Softmax", [x], dtype, shape, {"axis": 1 if nchw else -1}), nchw)
