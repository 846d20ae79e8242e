"""PAD, PADV2 -> Pad (constant mode); MIRROR_PAD -> Pad (reflect mode) for
REFLECT, and for SYMMETRIC (the edge repeated, which no ONNX Pad mode
does) a Concat of reversed Slices per padded axis; in NCHW when the input is."""
from __future__ import annotations

import numpy as np
import tflite

from nnrt_core.frontends.tflite.context import NCHW, OpContext
from nnrt_core.frontends.tflite.ops.registry import register

__all__ = ["pad", "mirror_pad"]

_REFLECT, _SYMMETRIC = 0, 1  #: tflite.MirrorPadMode


def _pad_rows(ctx: OpContext) -> list[list[int]]:
    """The constant, non-negative paddings of input 1 as ``[before, after]`` per axis."""
    rank = len(ctx.info(0).shape)
    p = ctx.const(1)
    if p is None or p.shape != (rank, 2):
        raise ctx.fail(f"paddings must be a constant of shape [{rank}, 2], got "
                       f"{'a computed tensor' if p is None else list(p.shape)}")
    rows = [[int(a), int(b)] for a, b in p.tolist()]  # a few ints: Python lists, not numpy calls
    if any(a < 0 or b < 0 for a, b in rows):
        raise ctx.fail(f"paddings must not be negative, got {rows}")
    return rows


@register("PAD", "PADV2")
def pad(ctx: OpContext) -> None:
    rows = _pad_rows(ctx)
    rank = len(rows)
    nchw = rank == 4 and ctx.is_nchw(0)
    if nchw:
        rows = [rows[k] for k in NCHW]
    x = ctx.x_nchw(0) if nchw else ctx.x(0)
    pads = np.array([a for a, _ in rows] + [b for _, b in rows], np.int64)
    inputs = [x, ctx.state.shared_constant(pads, f"{ctx.name}__pads")]
    if ctx.has(2):
        inputs.append(ctx.x(2) if ctx.info(2).shape == () else
                      ctx.constant(np.asarray(ctx.const(2), np.float32).reshape(()), "value"))
    dtype, shape = ctx.out_type(0, nchw)
    ctx.set_out(0, ctx.node("Pad", inputs, dtype, shape, {"mode": "constant"}), nchw)


@register("MIRROR_PAD")
def mirror_pad(ctx: OpContext) -> None:
    """REFLECT mirrors without the edge (ONNX Pad ``reflect``), SYMMETRIC with
    it: ``[a b c]`` padded by 2 is ``[c b a b c b a]`` and ``[b a a b c c b]``."""
    rows = _pad_rows(ctx)
    mode = int(ctx.options(tflite.MirrorPadOptions).Mode())
    if mode not in (_REFLECT, _SYMMETRIC):
        raise ctx.fail(f"mirror pad mode {mode} is neither REFLECT (0) nor SYMMETRIC (1)")
    nchw = len(rows) == 4 and ctx.is_nchw(0)
    if nchw:
        rows = [rows[k] for k in NCHW]
    x = ctx.x_nchw(0) if nchw else ctx.x(0)
    shape = [ctx.info(0).shape[k] for k in NCHW] if nchw else list(ctx.info(0).shape)
    limit = 0 if mode == _SYMMETRIC else 1  # LiteRT's bound: REFLECT pads < dim, SYMMETRIC <= dim
    for axis, ((a, b), d) in enumerate(zip(rows, shape)):
        if d is None or d < 0 or max(a, b) > d - limit:
            raise ctx.fail(f"{'SYMMETRIC' if mode else 'REFLECT'} paddings {[a, b]} on axis {axis} need a known "
                           f"dimension of at least {max(a, b) + limit}, got {d}")
    dtype, out_shape = ctx.out_type(0, nchw)
    if mode == _REFLECT:
        pads = np.array([a for a, _ in rows] + [b for _, b in rows], np.int64)
        y = ctx.node("Pad", [x, ctx.state.shared_constant(pads, f"{ctx.name}__pads")], dtype, out_shape,
                     {"mode": "reflect"})
    else:
        y = _symmetric(ctx, x, rows, shape, dtype)
    ctx.set_out(0, y, nchw)


def _symmetric(ctx: OpContext, x, rows: list[list[int]], shape: list[int], dtype):
    """SYMMETRIC mirror padding, one axis at a time: Concat(reverse(x[:a]), x, reverse(x[d-b:]))."""
    shape = list(shape)
    for axis, (a, b) in enumerate(rows):
        if not a and not b:
            continue
        d = shape[axis]
        parts = []
        # step -1; an end of -d - 1 reaches index 0 (-1 would count from the back)
        ends = (-d - 1, d - b - 1 if b < d else -d - 1)
        for side, (start, end, n) in (("before", (a - 1, ends[0], a)), ("after", (d - 1, ends[1], b))):
            if not n:
                continue
            ints = [ctx.constant(np.array([v], np.int64), f"{side}{axis}_{k}") for k, v in
                    enumerate((start, end, axis, -1))]
            parts.append((side, ctx.node("Slice", [x, *ints], dtype, shape[:axis] + [n] + shape[axis + 1:],
                                         hint=f"{side}{axis}")))
        shape[axis] = d + a + b
        ordered = [v for s, v in parts if s == "before"] + [x] + [v for s, v in parts if s == "after"]
        x = ctx.node("Concat", ordered, dtype, list(shape), {"axis": axis}, hint=f"mirror{axis}")
    return x
