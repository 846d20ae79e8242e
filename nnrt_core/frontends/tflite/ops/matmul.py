"""BATCH_MATMUL (adj_x, adj_y) -> MatMul with Transposes of the last two axes."""
from __future__ import annotations

import tflite

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.registry import register

__all__ = ["batch_matmul"]


@register("BATCH_MATMUL")
def batch_matmul(ctx: OpContext) -> None:
    o = ctx.options(tflite.BatchMatMulOptions)
    vals = []
    for i, adj in ((0, o.AdjX()), (1, o.AdjY())):
        shape = list(ctx.info(i).shape)
        if len(shape) < 2:
            raise ctx.fail(f"input {i} must have rank >= 2, got shape {shape}")
        v = ctx.weight(i)
        if adj:
            perm = list(range(len(shape)))
            perm[-2:] = perm[-1], perm[-2]
            shape[-2:] = shape[-1], shape[-2]
            v = ctx.node("Transpose", [v], v.dtype, shape, {"perm": perm}, hint=f"adj{i}")
        vals.append(v)
    dtype, out = ctx.out_type(0)
    ctx.set_out(0, ctx.node("MatMul", vals, dtype, out))
