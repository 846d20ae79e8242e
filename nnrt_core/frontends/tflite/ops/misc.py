"""CAST, SHAPE (a constant: shapes are static), ARG_MAX, L2_NORMALIZATION."""
from __future__ import annotations

import numpy as np
import tflite

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.common import fuse_activation
from nnrt_core.frontends.tflite.ops.fft import complex_part
from nnrt_core.frontends.tflite.ops.registry import register
from nnrt_core.ir import DataType

__all__ = ["cast", "shape", "arg_max", "l2_normalization"]


@register("CAST")
def cast(ctx: OpContext) -> None:
    dtype, out = ctx.out_type(0)
    if ctx.info(0).dtype == DataType.COMPLEX64:  # TFLite keeps the real part
        if dtype != DataType.FLOAT:
            raise ctx.fail(f"complex64 -> {dtype.name} is not supported (complex64 -> float32 is)")
        ctx.set_out(0, complex_part(ctx, 0, "real"))
        return
    ctx.set_out(0, ctx.node("Cast", [ctx.x(0)], dtype, out, {"to": int(dtype)}))


@register("SHAPE")
def shape(ctx: OpContext) -> None:
    dtype, out = ctx.out_type(0)
    if dtype not in (DataType.INT32, DataType.INT64):
        raise ctx.fail(f"output type {dtype.name} is not supported (int32 or int64)")
    ctx.state.slots[ctx.outputs[0]].const = np.array(ctx.info(0).shape, dtype.numpy)


@register("ARG_MAX")
def arg_max(ctx: OpContext) -> None:
    rank = len(ctx.info(0).shape)
    axis = ctx.const_ints(1)
    if len(axis) != 1 or not -rank <= axis[0] < rank:
        raise ctx.fail(f"axis {axis} must be one integer in [{-rank}, {rank})")
    dtype, out = ctx.out_type(0)
    y = ctx.node("ArgMax", [ctx.x(0)], DataType.INT64, out, {"axis": axis[0] % rank, "keepdims": 0}, hint="argmax")
    if dtype != DataType.INT64:
        y = ctx.node("Cast", [y], dtype, out, {"to": int(dtype)})
    ctx.set_out(0, y)


@register("L2_NORMALIZATION")
def l2_normalization(ctx: OpContext) -> None:
    """``x / max(sqrt(sum(x^2, last axis)), 1e-6)``, TFLite's epsilon."""
    o = ctx.options(tflite.L2NormOptions)
    dtype, out = ctx.out_type(0)
    x = ctx.x(0)
    norm_shape = list(out[:-1]) + [1]
    axes = ctx.constant(np.array([-1], np.int64), "axes")
    n = ctx.node("ReduceL2", [x, axes], dtype, norm_shape, {"keepdims": 1}, hint="norm")
    n = ctx.node("Max", [n, ctx.constant(np.array(1e-6, np.float32), "eps")], dtype, norm_shape, hint="eps")
    y = ctx.node("Div", [x, n], dtype, out)
    ctx.set_out(0, fuse_activation(ctx, y, o.FusedActivationFunction(), False))
