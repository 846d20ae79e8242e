"""PAD, PADV2 -> Pad (constant mode; in NCHW when the input is)."""
from __future__ import annotations

import numpy as np

from nnrt_core.frontends.tflite.context import NCHW, OpContext
from nnrt_core.frontends.tflite.ops.registry import register

__all__ = ["pad"]


@register("PAD", "PADV2")
def pad(ctx: OpContext) -> None:
    rank = len(ctx.info(0).shape)
    p = ctx.const(1)
    if p is None or p.shape != (rank, 2):
        raise ctx.fail(f"paddings must be a constant of shape [{rank}, 2], got "
                       f"{'a computed tensor' if p is None else list(p.shape)}")
    rows = [[int(a), int(b)] for a, b in p.tolist()]  # a few ints: Python lists, not numpy calls
    if any(a < 0 or b < 0 for a, b in rows):
        raise ctx.fail(f"paddings must not be negative, got {rows}")
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
