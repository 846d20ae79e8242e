"""RFFT2D, COMPLEX_ABS, REAL, IMAG: complex tensors as float pairs.

A complex64 TFLite tensor of shape ``S`` is carried as a float32 IR value of
shape ``S + [2]`` (real, imaginary), ONNX ``DFT``'s convention.  RFFT2D is
two exact-size real matrix products with constant cos/sin matrices along the
last axis (``fft_length[1] // 2 + 1`` bins), then a complex DFT along the
second last one when ``fft_length[0] > 1``.  Only the operators listed in
:data:`COMPLEX_OPS` may read a complex tensor."""
from __future__ import annotations

import functools

import numpy as np

from nnrt_core.frontends.tflite.context import OpContext
from nnrt_core.frontends.tflite.ops.registry import register
from nnrt_core.ir import DataType, Value

__all__ = ["COMPLEX_OPS", "check_complex", "complex_part", "rfft2d", "complex_abs", "real_imag"]

#: operators that read complex tensors (as float pairs)
COMPLEX_OPS = frozenset({"COMPLEX_ABS", "REAL", "IMAG", "CAST", "RESHAPE", "SQUEEZE", "EXPAND_DIMS"})
_MAX_DFT = 1 << 14  #: the largest fft_length entry (its matrices are fft_length x (fft_length/2+1))


def check_complex(ctx: OpContext) -> None:
    """Refuse an operator that would read a complex tensor it does not understand."""
    if ctx.op_name in COMPLEX_OPS:
        return
    for i, t in enumerate(ctx.inputs):
        if t >= 0 and ctx.state.info(t).dtype == DataType.COMPLEX64:
            raise ctx.fail(f"input {i} ({ctx.state.info(t).name!r}) is complex64; only "
                           f"{sorted(COMPLEX_OPS)} read complex tensors")


@functools.lru_cache(maxsize=8)
def _dft_matrices(n_in: int, n_out: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and -sin of 2*pi*k*n/length, shape (n_in, n_out), read-only and cached (a
    model's RFFT2Ds share them).  The angle index is reduced mod ``length`` first and
    looked up in a float64 table of ``length`` angles: exact and cheap."""
    k = np.outer(np.arange(n_in, dtype=np.int64), np.arange(n_out, dtype=np.int64)) % length
    angle = 2 * np.pi * np.arange(length) / length
    cos, sin = np.cos(angle).astype(np.float32)[k], (-np.sin(angle)).astype(np.float32)[k]
    cos.flags.writeable = sin.flags.writeable = False
    return cos, sin


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
    bins = fw // 2 + 1
    cos_w, sin_w = _dft_matrices(fw, bins, fw)
    out = shape[:-1] + [bins]
    re = ctx.node("MatMul", [x, ctx.constant(cos_w, "cos_w")], DataType.FLOAT, out, hint="re_w")
    im = ctx.node("MatMul", [x, ctx.constant(sin_w, "sin_w")], DataType.FLOAT, out, hint="im_w")
    if fh > 1:  # complex DFT along the rows: (C - iS)(re + i im)
        cos_h, sin_h = (m.T.copy() for m in _dft_matrices(fh, fh, fh))
        c, s = ctx.constant(cos_h, "cos_h"), ctx.constant(sin_h, "sin_h")
        mm = [ctx.node("MatMul", [a, b], DataType.FLOAT, out, hint=f"h_{k}")
              for k, (a, b) in enumerate(((c, re), (s, im), (c, im), (s, re)))]
        re = ctx.node("Sub", [mm[0], mm[1]], DataType.FLOAT, out, hint="re_h")
        im = ctx.node("Add", [mm[2], mm[3]], DataType.FLOAT, out, hint="im_h")
    axis = ctx.constant(np.array([-1], np.int64), "pair_axis")
    parts = [ctx.node("Unsqueeze", [v, axis], DataType.FLOAT, out + [1], hint=h) for v, h in ((re, "re"), (im, "im"))]
    ctx.set_out(0, ctx.node("Concat", parts, DataType.FLOAT, out + [2], {"axis": -1}, hint="pairs"))


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
