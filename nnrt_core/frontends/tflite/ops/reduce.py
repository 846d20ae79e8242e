"""MEAN, SUM, REDUCE_MAX (ReducerOptions keep_dims) -> ReduceMean / ReduceSum / ReduceMax."""
from __future__ import annotations

import numpy as np
import tflite

from nnrt_core.frontends.tflite.context import NCHW, OpContext
from nnrt_core.frontends.tflite.ops.registry import register

__all__ = ["reduce"]

_ONNX = {"MEAN": "ReduceMean", "SUM": "ReduceSum", "REDUCE_MAX": "ReduceMax", "REDUCE_MIN": "ReduceMin",
         "REDUCE_PROD": "ReduceProd"}


@register(*_ONNX)
def reduce(ctx: OpContext) -> None:
    keep = bool(ctx.options(tflite.ReducerOptions).KeepDims())
    rank = len(ctx.info(0).shape)
    axes = ctx.const_ints(1)
    if any(not -rank <= a < rank for a in axes):
        raise ctx.fail(f"axes {axes} are out of range for rank {rank}")
    axes = sorted({a % rank for a in axes})
    nchw = rank == 4 and ctx.is_nchw(0)
    if nchw and not keep:  # the kept axes must stay in NHWC order once the reduced ones are gone
        kept = [a for a in NCHW if a not in axes]
        nchw = kept == sorted(kept)
    x = ctx.x_nchw(0) if nchw else ctx.x(0)
    if nchw:
        axes = sorted(NCHW.index(a) for a in axes)
    out_nchw = nchw and keep
    dtype, shape = ctx.out_type(0, out_nchw)
    if not axes:
        ctx.set_out(0, ctx.node("Identity", [x], dtype, shape), out_nchw)
        return
    y = ctx.node(_ONNX[ctx.op_name], [x, ctx.constant(np.array(axes, np.int64), "axes")], dtype, shape,
                 {"keepdims": int(keep)})
    ctx.set_out(0, y, out_nchw)
