"""SPACE_TO_DEPTH and DEPTH_TO_SPACE (block size) -> SpaceToDepth / DepthToSpace (DCR), NCHW."""
from __future__ import annotations

import tflite

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.registry import register

__all__ = ["space_depth"]


@register("SPACE_TO_DEPTH", "DEPTH_TO_SPACE")
def space_depth(ctx: OpContext) -> None:
    to_depth = ctx.op_name == "SPACE_TO_DEPTH"
    cls = tflite.SpaceToDepthOptions if to_depth else tflite.DepthToSpaceOptions
    bs = int(ctx.options(cls).BlockSize())
    shape = ctx.info(0).shape
    if bs < 1 or len(shape) != 4:
        raise ctx.fail(f"needs a 4-D input and a positive block size, got shape {list(shape)}, block size {bs}")
    dtype, out = ctx.out_type(0, nchw=True)
    attrs = {"blocksize": bs} if to_depth else {"blocksize": bs, "mode": "DCR"}
    y = ctx.node("SpaceToDepth" if to_depth else "DepthToSpace", [ctx.x_nchw(0)], dtype, out, attrs)
    ctx.set_out(0, y, nchw=True)
