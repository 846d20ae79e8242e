"""QLinearMatMul: quantized matrix product with requantization.

``y = saturate(round((a - a_zp) @ (b - b_zp) * a_scale * b_scale / y_scale) + y_zp)``;
``a`` parameters are per-tensor or per-row, ``b`` parameters per-tensor or
per-column.  Version 21 adds float16/bfloat16 scales (the multiplier is
computed in the scale type) and float8 operands.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, register

from ._common import arith_float, is_float_type, is_int_type, saturate_cast
from ._imatmul import col_param, int_matmul, row_param


def qlinear_matmul(kernel: Kernel, a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp) -> np.ndarray:
    """Shared by QLinearMatMul and the contrib quantized GEMMs."""
    a = np.asarray(a)
    b = np.asarray(b)
    fail = kernel.fail
    if a.ndim == 0 or b.ndim == 0:
        raise fail("inputs must have rank >= 1")
    if is_int_type(a.dtype) and is_int_type(b.dtype):
        ai = a.astype(np.int64)
        bi = b.astype(np.int64)
        if a_zp is not None:
            ai = ai - row_param(a_zp, a, fail, "a_zero_point").astype(np.int64)
        if b_zp is not None:
            bi = bi - col_param(b_zp, b, fail, "b_zero_point").astype(np.int64)
        acc = int_matmul(ai, bi, fail).astype(np.float64)
    elif is_float_type(a.dtype) and is_float_type(b.dtype):
        af = a.astype(np.float32)
        bf = b.astype(np.float32)
        if a_zp is not None:
            af = af - row_param(a_zp, a, fail, "a_zero_point").astype(np.float32)
        if b_zp is not None:
            bf = bf - col_param(b_zp, b, fail, "b_zero_point").astype(np.float32)
        acc = np.matmul(af, bf).astype(np.float64)
    else:
        raise fail(f"unsupported operand types {a.dtype}, {b.dtype}")
    comp = arith_float(np.asarray(a_scale).dtype)
    sa = row_param(np.asarray(a_scale), a, fail, "a_scale").astype(comp)
    sb = col_param(np.asarray(b_scale), b, fail, "b_scale").astype(comp)
    ys = np.asarray(y_scale)
    if ys.size != 1:
        raise fail(f"y_scale must be a scalar (got shape {ys.shape})")
    mult = (sa * sb / ys.reshape(()).astype(comp)).astype(np.float64)
    if b.ndim == 1 and np.ndim(mult) >= 2:  # per-row multiplier of a matrix-vector product
        mult = mult[..., 0]
    d = acc * mult
    out_dt = np.asarray(y_zp).dtype if y_zp is not None else a.dtype
    if is_int_type(out_dt):
        d = np.rint(d)
        if y_zp is not None:
            if np.asarray(y_zp).size != 1:
                raise fail("y_zero_point must be a scalar")
            d = d + np.asarray(y_zp).reshape(()).astype(np.float64)
        return saturate_cast(d, out_dt)
    if y_zp is not None:
        d = d + np.asarray(y_zp).astype(np.float64).reshape(())
    return saturate_cast(d.astype(np.float32), out_dt)


class _QLinearMatMulBase(Kernel):
    op_type = "QLinearMatMul"
    _allow_float = False

    def __call__(self, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point) -> Sequence[Any]:
        if not self._allow_float and not (is_int_type(np.asarray(a).dtype) and is_int_type(np.asarray(b).dtype)):
            raise self.fail("QLinearMatMul-10 operands must be int8 or uint8")
        for name, zp, ref in (("a_zero_point", a_zero_point, a), ("b_zero_point", b_zero_point, b)):
            if zp is not None and np.asarray(zp).dtype != np.asarray(ref).dtype:
                raise self.fail(f"{name} must have the type of its operand")
        return (qlinear_matmul(self, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point),)


@register
class QLinearMatMul10(_QLinearMatMulBase):
    since_version = 10


@register
class QLinearMatMul21(_QLinearMatMulBase):
    since_version = 21
    _allow_float = True
