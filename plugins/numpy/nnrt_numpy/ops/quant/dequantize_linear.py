"""DequantizeLinear: ``y = (x - x_zero_point) * x_scale``.

Versions: 10 (per-tensor), 13 (``axis``), 19 (float8 inputs, float16/bfloat16
scales), 21 (``block_size``, 4/16-bit inputs), 23+ (``output_dtype``, float8e8m0
scales, int2/float4/float6 inputs).  The output type is ``output_dtype`` when
set, otherwise the scale's type; it is also the precision of the product.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._common import arith_float, dtype_from_attr, expand_param, is_float_type, is_int_type


class _DequantizeLinearBase(Kernel):
    op_type = "DequantizeLinear"
    _has_axis = False
    _has_block = False
    _has_output_dtype = False

    def _setup(self, node: NodeInfo) -> None:
        self.axis = int(node.attr("axis", 1)) if self._has_axis else 1
        self.block_size = int(node.attr("block_size", 0)) if self._has_block else 0
        if self.block_size < 0:
            raise self.fail(f"block_size must be >= 0, got {self.block_size}")
        code = int(node.attr("output_dtype", 0)) if self._has_output_dtype else 0
        self.output_dtype = dtype_from_attr(code) if code else None
        if self.output_dtype is not None and not is_float_type(self.output_dtype):
            raise self.fail(f"output_dtype must be a floating type, got {self.output_dtype}")
        xdt, zdt = node.dtype(0), node.dtype(2) if node.present(2) else None
        if xdt is not None and zdt is not None and np.dtype(xdt) != np.dtype(zdt):
            raise self.fail(f"x ({np.dtype(xdt)}) and x_zero_point ({np.dtype(zdt)}) must have the same type")

    def __call__(self, x: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray | None = None) -> Sequence[Any]:
        x = np.asarray(x)
        x_scale = np.asarray(x_scale)
        if not self._has_axis and x_scale.size != 1:
            raise self.fail(f"x_scale must be a scalar in opset < 13 (got shape {x_scale.shape})")
        out_dt = self.output_dtype if self.output_dtype is not None else arith_float(x_scale.dtype)
        axis = self.axis
        scale = expand_param(x_scale, x.shape, axis, self.block_size, self.fail, "x_scale")
        if is_int_type(x.dtype):
            diff = x.astype(np.int64)
            if x_zero_point is not None:
                zp = np.asarray(x_zero_point)
                if zp.dtype != x.dtype:
                    raise self.fail(f"x ({x.dtype}) and x_zero_point ({zp.dtype}) must have the same type")
                if zp.shape != x_scale.shape and not (zp.size == 1 and x_scale.size == 1):
                    raise self.fail(f"x_zero_point shape {zp.shape} must equal x_scale shape {x_scale.shape}")
                diff = diff - expand_param(zp, x.shape, axis, self.block_size, self.fail, "x_zero_point").astype(np.int64)
        elif is_float_type(x.dtype):
            diff = x.astype(np.float32)
            if x_zero_point is not None:
                zp = np.asarray(x_zero_point)
                diff = diff - expand_param(zp, x.shape, axis, self.block_size, self.fail, "x_zero_point").astype(np.float32)
        else:
            raise self.fail(f"unsupported quantized input type {x.dtype}")
        comp = arith_float(out_dt)
        y = diff.astype(comp) * scale.astype(comp)
        return (y.astype(out_dt, copy=False),)


@register
class DequantizeLinear10(_DequantizeLinearBase):
    since_version = 10


@register
class DequantizeLinear13(_DequantizeLinearBase):
    since_version = 13
    _has_axis = True


@register
class DequantizeLinear21(_DequantizeLinearBase):
    since_version = 21
    _has_axis = True
    _has_block = True


@register
class DequantizeLinear23(_DequantizeLinearBase):
    since_version = 23
    _has_axis = True
    _has_block = True
    _has_output_dtype = True
