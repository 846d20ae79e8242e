"""Dequantize -> float function -> requantize, for the per-tensor QLinear*
element-wise kernels (computed in float32 like ONNX Runtime's lookup tables)."""
from __future__ import annotations

from typing import Callable

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
