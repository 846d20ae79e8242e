"""RANGE -> Range, FILL -> Expand, REVERSE_V2 -> Slice with step -1 per axis."""
from __future__ import annotations

import numpy as np

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.registry import register

__all__ = ["range_", "fill", "reverse_v2"]

_BIG = np.iinfo(np.int64).max


@register("RANGE")
def range_(ctx: OpContext) -> None:
    dtype, shape = ctx.out_type(0)
    ctx.set_out(0, ctx.node("Range", [ctx.x(0), ctx.x(1), ctx.x(2)], dtype, shape))


@register("FILL")
def fill(ctx: OpContext) -> None:
    dtype, shape = ctx.out_type(0)
    if ctx.info(1).shape not in ((), (1,)):
        raise ctx.fail(f"the fill value must be a scalar, got shape {list(ctx.info(1).shape)}")
    ctx.set_out(0, ctx.node("Expand", [ctx.x(1), ctx.constant(np.array(shape, np.int64), "shape")], dtype, shape))


@register("REVERSE_V2")
def reverse_v2(ctx: OpContext) -> None:
    shape = list(ctx.info(0).shape)
    rank = len(shape)
    axes = ctx.const_ints(1)
    if any(not -rank <= a < rank for a in axes) or len({a % rank for a in axes}) != len(axes):
        raise ctx.fail(f"axes {axes} must be distinct axes of rank {rank}")
    axes = sorted(a % rank for a in axes)
    dtype, out = ctx.out_type(0)
    if not axes:
        ctx.set_out(0, ctx.node("Identity", [ctx.x(0)], dtype, out))
        return
    consts = [ctx.constant(np.array(v, np.int64), h) for v, h in
              (([-1] * len(axes), "starts"), ([-_BIG] * len(axes), "ends"), (axes, "axes"),
               ([-1] * len(axes), "steps"))]
    ctx.set_out(0, ctx.node("Slice", [ctx.x(0), *consts], dtype, out))
