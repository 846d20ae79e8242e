"""Helpers shared by the operator mappers: fused activations, SAME padding, layouts."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_core.frontends.tflite.context import NCHW, OpContext
from nnrt_core.frontends.tflite.options import ACTIVATIONS
from nnrt_core.ir import Value

__all__ = ["fuse_activation", "same_pads", "conv_pads", "nchw_axis", "broadcast_const_nchw", "layout_inputs",
           "finish"]


def fuse_activation(ctx: OpContext, x: Value, code: int, nchw: bool) -> Value:
    """``x`` followed by the fused activation ``code`` (NONE: ``x`` itself)."""
    name = ACTIVATIONS.get(code, str(code))
    if name == "NONE":
        return x
    dtype, shape = ctx.out_type(0, nchw)
    if name == "RELU":
        return ctx.node("Relu", [x], dtype, shape, hint="relu")
    if name in ("RELU6", "RELU_N1_TO_1"):
        lo, hi = (0.0, 6.0) if name == "RELU6" else (-1.0, 1.0)
        state, bounds = ctx.state, (np.array(lo, np.float32), np.array(hi, np.float32))
        return ctx.node("Clip", [x, state.shared_constant(bounds[0], f"{ctx.name}__min"),
                                 state.shared_constant(bounds[1], f"{ctx.name}__max")], dtype, shape, hint="clip")
    if name == "TANH":  # LiteRT's kernels clamp to an activation range: they silently skip a fused TANH
        raise ctx.fail("fused activation TANH is refused: LiteRT's kernels for this operator ignore it "
                       "(they only clamp), so no result would match both the file and the reference")
    raise ctx.fail(f"fused activation {name} is not supported (supported: NONE, RELU, RELU6, RELU_N1_TO_1)")


def finish(ctx: OpContext, x: Value, code: int, nchw: bool) -> None:
    """Apply fused activation ``code`` and record ``x`` as output 0."""
    ctx.set_out(0, fuse_activation(ctx, x, code, nchw), nchw)


def same_pads(size: int, kernel: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """TFLite's SAME padding of one spatial dimension: (begin, end), the odd pixel at the end."""
    out = (size + stride - 1) // stride
    eff = (kernel - 1) * dilation + 1
    total = max((out - 1) * stride + eff - size, 0)
    return total // 2, total - total // 2


def conv_pads(ctx: OpContext, padding: int, hw: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
              dilations: Sequence[int] = (1, 1)) -> list[int]:
    """ONNX ``pads`` (h_begin, w_begin, h_end, w_end) for TFLite padding code ``padding``."""
    if padding == 1:  # VALID
        return [0, 0, 0, 0]
    if padding != 0:
        raise ctx.fail(f"padding mode {padding} is not supported (SAME or VALID)")
    hb, he = same_pads(hw[0], kernel[0], strides[0], dilations[0])
    wb, we = same_pads(hw[1], kernel[1], strides[1], dilations[1])
    return [hb, wb, he, we]


def nchw_axis(axis: int, rank: int = 4) -> int:
    """The NCHW position of NHWC axis ``axis`` (negative allowed)."""
    return NCHW.index(axis % rank)


def broadcast_const_nchw(ctx: OpContext, i: int) -> Value | None:
    """Constant input ``i`` of rank <= 4 broadcast-aligned to NHWC and transposed to NCHW
    (``None`` when input ``i`` is not constant)."""
    data = ctx.const(i)
    if data is None or data.ndim > 4:
        return None
    if data.ndim == 0:
        return ctx.x(i)
    info = ctx.info(i)
    if info.quant is not None and data.dtype != np.float32:
        return None  # quantized constants keep their DequantizeLinear path
    full = data.reshape((1,) * (4 - data.ndim) + data.shape)
    return ctx.constant(np.ascontiguousarray(full.transpose(NCHW)), f"in{i}_nchw")


def layout_inputs(ctx: OpContext, idx: Sequence[int]) -> tuple[list[Value], bool]:
    """Inputs ``idx`` of an element-wise op in one layout: NCHW when some input
    already is and every other one is 4-D or a broadcastable constant, else TFLite layout."""
    if any(ctx.is_nchw(i) for i in idx):
        vals: list[Any] = []
        for i in idx:
            if len(ctx.info(i).shape) == 4 and ctx.const(i) is None:
                vals.append(ctx.x_nchw(i))
            else:
                vals.append(broadcast_const_nchw(ctx, i))
        if all(v is not None for v in vals):
            return vals, True
    return [ctx.x(i) for i in idx], False

