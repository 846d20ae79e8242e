"""GATHER (axis; batch_dims 0) -> Gather."""
from __future__ import annotations

import numpy as np
import tflite

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.registry import register

__all__ = ["gather"]


@register("GATHER")
def gather(ctx: OpContext) -> None:
    o = ctx.options(tflite.GatherOptions)
    if o.BatchDims():
        raise ctx.fail(f"batch_dims {o.BatchDims()} is not supported (0 only)")
    shape = ctx.info(0).shape
    axis = int(o.Axis())
    if not -len(shape) <= axis < len(shape):
        raise ctx.fail(f"axis {axis} is out of range for shape {list(shape)}")
    idx = ctx.const(1)
    if idx is not None and idx.size and (idx.min() < 0 or idx.max() >= shape[axis]):
        raise ctx.fail(f"indices must lie in [0, {shape[axis]}), got [{int(idx.min())}, {int(idx.max())}]")
    indices = ctx.constant(np.asarray(idx, np.int64), "indices") if idx is not None else ctx.x(1)
    dtype, out = ctx.out_type(0)
    ctx.set_out(0, ctx.node("Gather", [ctx.x(0), indices], dtype, out, {"axis": axis % len(shape)}))
