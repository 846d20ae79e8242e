"""CONCATENATION -> Concat (in NCHW when the inputs are)."""
from __future__ import annotations

import tflite

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.common import layout_inputs, nchw_axis
from nnrt_core.frontends.tflite.ops.registry import register

__all__ = ["concatenation"]


@register("CONCATENATION")
def concatenation(ctx: OpContext) -> None:
    o = ctx.options(tflite.ConcatenationOptions)
    if o.FusedActivationFunction():  # LiteRT's kernel skips it: refuse rather than disagree with the reference
        raise ctx.fail("a fused activation on CONCATENATION is refused: LiteRT's kernel ignores it")
    idx = list(range(len(ctx.inputs)))
    rank = len(ctx.out_info().shape)
    axis = int(o.Axis())
    if not -rank <= axis < rank:
        raise ctx.fail(f"axis {axis} is out of range for rank {rank}")
    four_d = rank == 4 and all(len(ctx.info(i).shape) == 4 for i in idx)
    vals, nchw = layout_inputs(ctx, idx) if four_d else ([ctx.x(i) for i in idx], False)
    dtype, shape = ctx.out_type(0, nchw)
    y = ctx.node("Concat", vals, dtype, shape, {"axis": nchw_axis(axis) if nchw else axis % rank})
    ctx.set_out(0, y, nchw)
