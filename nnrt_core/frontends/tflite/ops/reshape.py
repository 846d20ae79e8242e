"""RESHAPE, SQUEEZE, EXPAND_DIMS -> Reshape to the output tensor's declared shape."""
from __future__ import annotations

import math

import numpy as np

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.registry import register
from nnrt_core.ir import DataType

__all__ = ["reshape"]


@register("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
def reshape(ctx: OpContext) -> None:
    in_shape = ctx.info(0).shape
    dtype, shape = ctx.out_type(0)
    if dtype == DataType.COMPLEX64:  # float pairs in a trailing axis (ops/fft.py)
        in_shape, shape, dtype = [*in_shape, 2], [*shape, 2], DataType.FLOAT
    if math.prod(in_shape) != math.prod(shape):
        raise ctx.fail(f"cannot reshape {list(in_shape)} to the declared output shape {list(shape)}")
    target = ctx.constant(np.array(shape, np.int64), "shape")
    ctx.set_out(0, ctx.node("Reshape", [ctx.x(0), target], dtype, shape))
