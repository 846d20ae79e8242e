"""SLICE and STRIDED_SLICE (begin/end/shrink masks, offset) -> Slice (+ Reshape)."""
from __future__ import annotations

import math

import numpy as np
import tflite

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.registry import register

__all__ = ["slice_", "strided_slice"]

_BIG = np.iinfo(np.int64).max


def _emit(ctx: OpContext, starts: list[int], ends: list[int], steps: list[int]) -> None:
    rank = len(starts)
    state = ctx.state  # the axes and steps repeat from slice to slice: one constant per distinct value
    consts = [ctx.constant(np.array(starts, np.int64), "starts"), ctx.constant(np.array(ends, np.int64), "ends"),
              state.shared_constant(np.arange(rank, dtype=np.int64), f"{ctx.name}__axes"),
              state.shared_constant(np.array(steps, np.int64), f"{ctx.name}__steps")]
    dtype, shape = ctx.out_type(0)
    sliced_shape = [len(range(*slice(s, e, st).indices(d))) for s, e, st, d in
                    zip(starts, ends, steps, ctx.info(0).shape)]
    y = ctx.node("Slice", [ctx.x(0), *consts], dtype, sliced_shape, hint="slice")
    if sliced_shape != list(shape):
        if math.prod(sliced_shape) != math.prod(shape):
            raise ctx.fail(f"the slice has shape {sliced_shape}, the declared output {list(shape)}")
        y = ctx.node("Reshape", [y, ctx.constant(np.array(shape, np.int64), "shape")], dtype, shape)
    ctx.set_out(0, y)


@register("SLICE")
def slice_(ctx: OpContext) -> None:
    shape = ctx.info(0).shape
    begin, size = ctx.const_ints(1), ctx.const_ints(2)
    if len(begin) != len(shape) or len(size) != len(shape):
        raise ctx.fail(f"begin {begin} and size {size} must have {len(shape)} entries")
    ends = []
    for b, s, d in zip(begin, size, shape):
        if not 0 <= b <= d or s < -1 or (s >= 0 and b + s > d):
            raise ctx.fail(f"slice begin {begin} size {size} is out of range for shape {list(shape)}")
        ends.append(d if s == -1 else b + s)
    _emit(ctx, begin, ends, [1] * len(shape))


@register("STRIDED_SLICE")
def strided_slice(ctx: OpContext) -> None:
    o = ctx.options(tflite.StridedSliceOptions)
    shape = ctx.info(0).shape
    rank = len(shape)
    if o.EllipsisMask() or o.NewAxisMask():
        raise ctx.fail("ellipsis_mask and new_axis_mask are not supported")
    begin, end, strides = ctx.const_ints(1), ctx.const_ints(2), ctx.const_ints(3)
    if not len(begin) == len(end) == len(strides) == rank:
        raise ctx.fail(f"begin {begin}, end {end} and strides {strides} must have {rank} entries")
    if 0 in strides:
        raise ctx.fail(f"strides {strides} must not be 0")
    if o.Offset():
        end = [b + e for b, e in zip(begin, end)]
    shrink, begin_mask, end_mask = o.ShrinkAxisMask(), o.BeginMask(), o.EndMask()  # read once, not per axis
    starts, ends = [], []
    for i, (b, e, s, d) in enumerate(zip(begin, end, strides, shape)):
        if shrink >> i & 1:
            b = b + d if b < 0 else b
            if not 0 <= b < d:
                raise ctx.fail(f"shrunk axis {i} index {begin[i]} is out of range for size {d}")
            starts.append(b)
            ends.append(b + 1)
            strides[i] = 1
            continue
        starts.append((0 if s > 0 else _BIG) if begin_mask >> i & 1 else b)
        ends.append((_BIG if s > 0 else -_BIG) if end_mask >> i & 1 else e)
    _emit(ctx, starts, ends, strides)
