"""Dequantize -> float function -> requantize, for the per-tensor QLinear*
element-wise kernels (computed in float32 like ONNX Runtime's lookup tables)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..quant._common import is_int_type, saturate_cast
from ._util import scalar


def dequant(x: np.ndarray, scale, zp, fail: Callable[[str], Exception], name: str) -> np.ndarray:
    x = np.asarray(x)
    if not is_int_type(x.dtype) or x.dtype.itemsize != 1:
        raise fail(f"{name} must be int8 or uint8, got {x.dtype}")
    if zp is not None and np.asarray(zp).dtype != x.dtype:
        raise fail(f"{name} zero point must have the type of {name}")
    s = np.float32(scalar(scale, fail, f"{name}_scale"))
    z = np.float32(scalar(zp, fail, f"{name}_zero_point"))
    return (x.astype(np.float32) - z) * s


def quant(y: np.ndarray, scale, zp, dtype: np.dtype, fail: Callable[[str], Exception], name: str = "Y") -> np.ndarray:
    s = np.float32(scalar(scale, fail, f"{name}_scale"))
    z = scalar(zp, fail, f"{name}_zero_point")
    if zp is not None:
        dtype = np.asarray(zp).dtype
    return saturate_cast(np.rint(np.asarray(y, dtype=np.float32) / s).astype(np.float64) + z, dtype)


def binary(a: np.ndarray, a_scale, a_zp, b: np.ndarray, b_scale, b_zp, c_scale, c_zp,
           func: Callable[[np.ndarray, np.ndarray], np.ndarray], fail: Callable[[str], Exception]) -> Any:
    """``quantize(func(dequantize(A), dequantize(B)))`` with numpy broadcasting
    (QLinearAdd, QLinearMul): A and B of one int8/uint8 type, C of its zero point's."""
    fa = dequant(a, a_scale, a_zp, fail, "A")
    fb = dequant(b, b_scale, b_zp, fail, "B")
    if a.dtype != b.dtype:
        raise fail("A and B must have the same type")
    try:
        y = func(fa, fb)
    except ValueError:
        raise fail(f"shapes {a.shape} and {b.shape} do not broadcast") from None
    return quant(y, c_scale, c_zp, a.dtype, fail, "C")
