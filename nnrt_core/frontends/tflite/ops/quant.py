"""DEQUANTIZE, QUANTIZE and DENSIFY.

DEQUANTIZE of an fp16 constant becomes a float32 constant; of an int8
constant it keeps the quantized data (the readers get DequantizeLinear);
of an activation it is the identity (activations are carried dequantized).
QUANTIZE is the identity plus the QDQ pair every quantized output gets.
DENSIFY of a sparse constant densifies it at import.
"""
from __future__ import annotations

import numpy as np

from nnrt_core.frontends.tflite.context import GraphState, OpContext
from nnrt_core.frontends.tflite.halves import LUT_MIN, half_to_float
from nnrt_core.frontends.tflite.ops.registry import register, shortcut
from nnrt_core.frontends.tflite.sparse import densify

__all__ = ["dequantize", "dequantize_fp16_constant", "quantize", "densify_op", "half_to_float", "LUT_MIN"]


@register("DEQUANTIZE")
def dequantize(ctx: OpContext) -> None:
    data = ctx.const(0)
    out = ctx.state.slots[ctx.outputs[0]]
    if data is not None and data.dtype == np.float16:
        out.set_half(data)  # converted when read, in the layout it is read in (Slot.const_value)
        return
    if data is not None:
        ctx.alias(0, 0)
        return
    slot = ctx.state.slots[ctx.inputs[0]]
    if slot.nchw is not None:
        ctx.set_out(0, slot.nchw, nchw=True)
    if slot.plain is not None or slot.nchw is None:
        ctx.set_out(0, ctx.x(0))
    if ctx.x(0).dtype != ctx.out_type(0)[0]:
        raise ctx.fail(f"dequantizing a {ctx.info(0).dtype.name.lower()} tensor without quantization parameters")


@shortcut(dequantize)
def dequantize_fp16_constant(state: GraphState, inputs: tuple[int, ...], outputs: tuple[int, ...]) -> bool:
    """DEQUANTIZE of an fp16 constant (half the operators of fp16 MediaPipe models)
    without building an ``OpContext``: the same result as :func:`dequantize`.
    Anything else (bad indices included) goes through the mapper."""
    if len(inputs) != 1 or len(outputs) != 1:
        return False
    n = len(state.slots)
    i, o = inputs[0], outputs[0]
    if not (0 <= i < n and 0 <= o < n):
        return False
    data = state.slots[i].const
    if data is None or data.dtype != np.float16:
        return False
    state.slots[o].set_half(data)
    return True


@register("QUANTIZE")
def quantize(ctx: OpContext) -> None:
    nchw = ctx.is_nchw(0)
    x = ctx.x_nchw(0) if nchw else ctx.x(0)
    if ctx.state.slots[ctx.outputs[0]].quant is None:
        raise ctx.fail(f"output {ctx.out_info().name!r} has no quantization parameters")
    ctx.set_out(0, x, nchw)


@register("DENSIFY")
def densify_op(ctx: OpContext) -> None:
    info = ctx.info(0)
    if info.sparse is None or info.data is None:
        raise ctx.fail(f"input {info.name!r} must be a sparse constant")
    out = ctx.state.slots[ctx.outputs[0]]
    dense = densify(info.data, info.sparse, info.shape, info.dtype.numpy, info.desc)
    out.const, out.quant = dense, info.quant
