"""RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR -> Resize (NCHW, sizes).

align_corners -> ``align_corners``; half_pixel_centers -> ``half_pixel``;
neither -> ``asymmetric``.  Nearest rounds like TFLite: ``floor``, or
``round_prefer_ceil`` with align_corners and with half_pixel_centers (where
``floor((x + 0.5) * scale)`` is ``round_prefer_ceil`` of ONNX's half-pixel coordinate).
"""
from __future__ import annotations

import numpy as np
import tflite

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.registry import register

__all__ = ["resize"]


@register("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")
def resize(ctx: OpContext) -> None:
    bilinear = ctx.op_name == "RESIZE_BILINEAR"
    o = ctx.options(tflite.ResizeBilinearOptions if bilinear else tflite.ResizeNearestNeighborOptions)
    shape = ctx.info(0).shape
    size = ctx.const_ints(1)
    if len(shape) != 4 or len(size) != 2 or min(size) < 1:
        raise ctx.fail(f"needs a 4-D input and a positive [height, width] size, got {list(shape)} and {size}")
    align, half = bool(o.AlignCorners()), bool(o.HalfPixelCenters())
    if align and half:
        raise ctx.fail("align_corners and half_pixel_centers cannot both be set")
    if align:
        mode = "align_corners"
    elif half:  # nearest: floor((x + 0.5) * scale) == round_prefer_ceil((x + 0.5) * scale - 0.5)
        mode = "half_pixel"
    else:
        mode = "asymmetric"
    attrs = {"mode": "linear" if bilinear else "nearest", "coordinate_transformation_mode": mode}
    if not bilinear:
        attrs["nearest_mode"] = "round_prefer_ceil" if align or half else "floor"
    dtype, out = ctx.out_type(0, nchw=True)
    sizes = ctx.constant(np.array([shape[0], shape[3], size[0], size[1]], np.int64), "sizes")
    ctx.set_out(0, ctx.node("Resize", [ctx.x_nchw(0), None, None, sizes], dtype, out, attrs), nchw=True)
