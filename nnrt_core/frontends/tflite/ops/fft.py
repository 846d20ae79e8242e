"""RFFT2D, COMPLEX_ABS, REAL, IMAG: complex tensors as float pairs.

A complex64 TFLite tensor of shape ``S`` is carried as a float32 IR value of
shape ``S + [2]`` (real, imaginary), ONNX ``DFT``'s convention.  RFFT2D is
ONNX ``DFT``: one-sided along the last axis, then a full one along the second
last when ``fft_length[0] > 1``.  Engines compute power-of-two lengths (the
only ones LiteRT's kernel accepts) as an FFT, O(n log n).  Only the operators
listed in :data:`COMPLEX_OPS` may read a complex tensor."""
from __future__ import annotations

import numpy as np

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.registry import register
from nnrt_core.ir import DataType, Value

__all__ = ["COMPLEX_OPS", "check_complex", "complex_part", "rfft2d", "complex_abs", "real_imag"]

#: operators that read complex tensors (as float pairs)
COMPLEX_OPS = frozenset({"COMPLEX_ABS", "REAL", "IMAG", "CAST", "RESHAPE", "SQUEEZE", "EXPAND_DIMS"})
_MAX_DFT = 1 << 14  #: the largest fft_length entry


def check_complex(ctx: OpContext) -> None:
    """Refuse an operator that would read a complex tensor it does not understand."""
    if ctx.op_name in COMPLEX_OPS:
        return
    for i, t in enumerate(ctx.inputs):
        if t >= 0 and ctx.state.info(t).dtype == DataType.COMPLEX64:
            raise ctx.fail(f"input {i} ({ctx.state.info(t).name!r}) is complex64; only "
                           f"{sorted(COMPLEX_OPS)} read complex tensors")


def _fit(ctx: OpContext, x: Value, shape: list[int], axis: int, size: int, hint: str) -> tuple[Value, list[int]]:
    """``x`` cropped or zero-padded to ``size`` along ``axis`` (negative)."""
    have = shape[axis]
    if have == size:
        return x, shape
    new = list(shape)
    new[axis] = size
    rank = len(shape)
    if have > size:
        consts = [ctx.constant(np.array(v, np.int64), f"{hint}_{n}") for v, n in
                  (([0], "starts"), ([size], "ends"), ([axis % rank], "axes"))]
        return ctx.node("Slice", [x, *consts], DataType.FLOAT, new, hint=hint), new
    pads = [0] * (2 * rank)
    pads[rank + axis % rank] = size - have
    return ctx.node("Pad", [x, ctx.constant(np.array(pads, np.int64), f"{hint}_pads")], DataType.FLOAT, new,
                    hint=hint), new


@register("RFFT2D")
def rfft2d(ctx: OpContext) -> None:
    length, shape = ctx.const_ints(1), list(ctx.info(0).shape)
    if len(length) != 2 or not all(0 < n <= _MAX_DFT for n in length) or len(shape) < 2:
        raise ctx.fail(f"fft_length {length} must be two sizes in 1..{_MAX_DFT} for an input of "
                       f"rank >= 2 (input shape {shape})")
    fh, fw = length
    if ctx.info(0).dtype != DataType.FLOAT or ctx.out_info(0).dtype != DataType.COMPLEX64:
        raise ctx.fail("expected a float32 input and a complex64 output")
    x, shape = _fit(ctx, ctx.x(0), shape, -1, fw, "fit_w")
    x, shape = _fit(ctx, x, shape, -2, fh, "fit_h")
    ctx.set_out(0, _dft(ctx, x, shape, fh, fw))


def _dft(ctx: OpContext, x: Value, shape: list[int], fh: int, fw: int) -> Value:
    """RFFT2D of ``x`` (already ``fh x fw`` in its last two axes) as ONNX ``DFT``
    (opset 17 form, ``axis`` an attribute): the pair layout is DFT's own."""
    rank = len(shape)
    real = ctx.node("Unsqueeze", [x, ctx.constant(np.array([-1], np.int64), "real_axis")], DataType.FLOAT,
                    shape + [1], hint="as_real")
    out = shape[:-1] + [fw // 2 + 1, 2]
    y = ctx.node("DFT", [real], DataType.FLOAT, out, {"axis": rank - 1, "onesided": 1}, hint="dft_w")
    if fh > 1:  # the complex transform along the rows
        y = ctx.node("DFT", [y], DataType.FLOAT, out, {"axis": rank - 2, "onesided": 0}, hint="dft_h")
    return y


def complex_part(ctx: OpContext, index: int, hint: str) -> Value:
    """The real (0) or imaginary (1) part of complex input 0."""
    shape = list(ctx.info(0).shape)
    consts = [ctx.constant(np.array(v, np.int64), f"{hint}_{n}") for v, n in
              (([index], "starts"), ([index + 1], "ends"), ([-1], "axes"))]
    part = ctx.node("Slice", [ctx.x(0), *consts], DataType.FLOAT, shape + [1], hint=hint)
    return ctx.node("Squeeze", [part, ctx.constant(np.array([-1], np.int64), f"{hint}_axis")],
                    DataType.FLOAT, shape, hint=f"{hint}_squeeze")


def _complex_input(ctx: OpContext) -> None:
    if ctx.info(0).dtype != DataType.COMPLEX64 or ctx.out_info(0).dtype != DataType.FLOAT:
        raise ctx.fail(f"expected a complex64 input and a float32 output, got "
                       f"{ctx.info(0).dtype.name} -> {ctx.out_info(0).dtype.name}")


@register("COMPLEX_ABS")
def complex_abs(ctx: OpContext) -> None:
    _complex_input(ctx)
    shape = list(ctx.info(0).shape)
    sq = ctx.node("Mul", [ctx.x(0), ctx.x(0)], DataType.FLOAT, shape + [2], hint="square")
    total = ctx.node("ReduceSum", [sq, ctx.constant(np.array([-1], np.int64), "axis")], DataType.FLOAT, shape,
                     {"keepdims": 0}, hint="sum")
    ctx.set_out(0, ctx.node("Sqrt", [total], DataType.FLOAT, shape))


@register("REAL", "IMAG")
def real_imag(ctx: OpContext) -> None:
    _complex_input(ctx)
    ctx.set_out(0, complex_part(ctx, 0 if ctx.op_name == "REAL" else 1, ctx.op_name.lower()))
