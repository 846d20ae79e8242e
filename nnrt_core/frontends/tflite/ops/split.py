"""SPLIT, SPLIT_V -> Split; PACK -> Unsqueeze + Concat; UNPACK -> Split + Squeeze."""
from __future__ import annotations

import numpy as np
import tflite

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.common import nchw_axis
from nnrt_core.frontends.tflite.ops.registry import register

__all__ = ["split", "pack", "unpack"]


def _split(ctx: OpContext, data: int, axis_input: int) -> None:
    """SPLIT (axis, data) and SPLIT_V (data, sizes, axis): sizes come from the outputs."""
    axes = ctx.const_ints(axis_input)
    if len(axes) != 1:
        raise ctx.fail(f"axis must be one integer, got {axes}")
    axis = axes[0]
    shape = ctx.info(data).shape
    rank = len(shape)
    if not -rank <= axis < rank:
        raise ctx.fail(f"axis {axis} is out of range for shape {list(shape)}")
    axis %= rank
    sizes = [ctx.out_info(j).shape[axis] for j in range(len(ctx.outputs))]
    if sum(sizes) != shape[axis]:
        raise ctx.fail(f"output sizes {sizes} along axis {axis} do not add up to {shape[axis]}")
    nchw = rank == 4 and ctx.is_nchw(data)
    x = ctx.x_nchw(data) if nchw else ctx.x(data)
    types = [ctx.out_type(j, nchw) for j in range(len(ctx.outputs))]
    outs = ctx.nodes("Split", [x, ctx.constant(np.array(sizes, np.int64), "split")], types,
                     {"axis": nchw_axis(axis) if nchw else axis})
    for j, v in enumerate(outs):
        ctx.set_out(j, v, nchw)


@register("SPLIT")
def split(ctx: OpContext) -> None:
    _split(ctx, 1, 0)


@register("SPLIT_V")
def split_v(ctx: OpContext) -> None:
    _split(ctx, 0, 2)


@register("PACK")
def pack(ctx: OpContext) -> None:
    axis = int(ctx.options(tflite.PackOptions).Axis())
    dtype, shape = ctx.out_type(0)
    if not -len(shape) <= axis < len(shape):
        raise ctx.fail(f"axis {axis} is out of range for output shape {list(shape)}")
    axis %= len(shape)
    parts = []
    for i in range(len(ctx.inputs)):
        s = list(ctx.info(i).shape)
        s.insert(axis, 1)
        parts.append(ctx.node("Reshape", [ctx.x(i), ctx.constant(np.array(s, np.int64), f"shape{i}")],
                              dtype, s, hint=f"unsqueeze{i}"))
    ctx.set_out(0, ctx.node("Concat", parts, dtype, shape, {"axis": axis}))


@register("UNPACK")
def unpack(ctx: OpContext) -> None:
    shape = ctx.info(0).shape
    axis = int(ctx.options(tflite.UnpackOptions).Axis())
    if not -len(shape) <= axis < len(shape) or shape[axis] != len(ctx.outputs):
        raise ctx.fail(f"axis {axis} of shape {list(shape)} does not give {len(ctx.outputs)} outputs")
    axis %= len(shape)
    piece = list(shape)
    piece[axis] = 1
    dtype = ctx.out_type(0)[0]
    outs = ctx.nodes("Split", [ctx.x(0), ctx.constant(np.ones(len(ctx.outputs), np.int64), "split")],
                     [(dtype, piece)] * len(ctx.outputs), {"axis": axis})
    for j, v in enumerate(outs):
        d, s = ctx.out_type(j)
        ctx.set_out(j, ctx.node("Reshape", [v, ctx.constant(np.array(s, np.int64), f"shape{j}")], d, s,
                                hint=f"squeeze{j}"))
