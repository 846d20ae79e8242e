"""TRANSPOSE -> Transpose (a constant permutation)."""
from __future__ import annotations

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.registry import register

__all__ = ["transpose"]


@register("TRANSPOSE")
def transpose(ctx: OpContext) -> None:
    rank = len(ctx.info(0).shape)
    perm = ctx.const_ints(1)
    if sorted(p % rank if -rank <= p < rank else -1 for p in perm) != list(range(rank)):
        raise ctx.fail(f"permutation {perm} is not a permutation of {rank} axes")
    dtype, shape = ctx.out_type(0)
    ctx.set_out(0, ctx.node("Transpose", [ctx.x(0)], dtype, shape, {"perm": [p % rank for p in perm]}))
