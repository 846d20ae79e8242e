"""Resize (nearest / bilinear), separable per axis."""
from __future__ import annotations

import numpy as np

from nnrt_core.ir import Node
from nnrt_npu_emu.numerics import f32
from nnrt_npu_emu.ops.common import Step, Unsupported, kernel, op, store

__all__: list[str] = []

_CTM = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


@op("Resize", const_inputs=(1, 2, 3), int8="generic")
def _lower_resize(node: Node, cx) -> list[Step]:
    xs, ys = cx.shape(node.inputs[0]), cx.shape(node.outputs[0])
    legacy = (node.opset or 13) < 11
    mode = node.attr("mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise Unsupported(f"Resize mode={mode!r} is not supported by the chip (nearest, linear)")
    ctm = "asymmetric" if legacy else node.attr("coordinate_transformation_mode", "half_pixel")
    if ctm not in _CTM:
        raise Unsupported(f"Resize coordinate_transformation_mode={ctm!r} is not supported")
    nearest = "floor" if legacy else node.attr("nearest_mode", "round_prefer_floor")
    if nearest not in _NEAREST:
        raise Unsupported(f"Resize nearest_mode={nearest!r} is not supported")
    if node.attr("antialias", 0):
        raise Unsupported("Resize antialias=1 is not supported")
    if node.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise Unsupported("Resize keep_aspect_ratio_policy other than 'stretch' is not supported")
    if node.attr("exclude_outside", 0):
        raise Unsupported("Resize exclude_outside=1 is not supported")
    rank = len(xs)
    axes = [a % rank for a in (node.attr("axes", None) or range(rank))]
    scales_in = 1 if legacy else 2
    scales = None
    if len(node.inputs) > scales_in and node.inputs[scales_in] is not None:
        c = cx.const(node.inputs[scales_in])
        if c is None:
            raise Unsupported("Resize scales must be a compile-time constant")
        if c.size:
            scales = [float(v) for v in c.reshape(-1)]
    full = [1.0] * rank
    for i, ax in enumerate(axes):
        full[ax] = scales[i] if scales is not None else ys[ax] / xs[ax]
    if mode == "linear" and sum(1 for i in range(rank) if xs[i] != ys[i] or full[i] != 1.0) > 3:
        raise Unsupported("Resize linear over more than 3 axes")
    return [Step("resize", [node.inputs[0]], [node.outputs[0]],
                 {"mode": mode, "ctm": ctm, "nearest": nearest, "scales": full},
                 int(np.prod(ys)) * (4 if mode == "linear" else 1))]


def _coords(ctm: str, n_out: int, n_in: int, scale: float) -> np.ndarray:
    x = np.arange(n_out, dtype=np.float64)
    if ctm == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if ctm == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if n_out > 1 else np.zeros_like(x)
    if ctm == "align_corners":
        length = n_in * scale  # ONNX: the (possibly fractional) resized length
        return x * (n_in - 1) / (length - 1) if length != 1 else np.zeros_like(x)
    if ctm == "asymmetric":
        return x / scale
    return (x + 0.5) / scale  # tf_half_pixel_for_nn


@kernel("resize")
def _k_resize(ins, outs, a):
    x = f32(ins[0])
    out_shape = outs[0].shape
    for ax in range(x.ndim):
        n_in, n_out = x.shape[ax], out_shape[ax]
        if n_in == n_out and a["scales"][ax] == 1.0:
            continue
        c = _coords(a["ctm"], n_out, n_in, a["scales"][ax])
        if a["mode"] == "nearest":
            m = a["nearest"]
            if m == "round_prefer_floor":
                idx = np.ceil(c - 0.5)
            elif m == "round_prefer_ceil":
                idx = np.floor(c + 0.5)
            elif m == "floor":
                idx = np.floor(c)
            else:
                idx = np.ceil(c)
            x = np.take(x, np.clip(idx, 0, n_in - 1).astype(np.intp), axis=ax)
        else:
            c = np.clip(c, 0, n_in - 1)
            i0 = np.floor(c).astype(np.intp)
            i1 = np.minimum(i0 + 1, n_in - 1)
            w = (c - i0).astype(np.float32).reshape((-1,) + (1,) * (x.ndim - ax - 1))
            x = np.take(x, i0, axis=ax) * (1 - w) + np.take(x, i1, axis=ax) * w
    store(outs[0], x)
