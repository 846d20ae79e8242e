"""QuantizeLinear: ``y = saturate(round_half_even(x / y_scale) + y_zero_point)``.

Versions: 10 (per-tensor), 13 (``axis``, per-axis), 19 (``saturate``, float8
outputs), 21 (``block_size``, ``output_dtype``, int4/uint4/int16/uint16),
23+ (``precision``, float4/float8e8m0 scales, int2/float6 outputs).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._common import arith_float, dtype_from_attr, expand_param, is_float_type, is_int_type, saturate_cast


class _QuantizeLinearBase(Kernel):
    op_type = "QuantizeLinear"
    _has_axis = False
    _has_saturate = False
    _has_block = False
    _has_precision = False

    def _setup(self, node: NodeInfo) -> None:
        self.axis = int(node.attr("axis", 1)) if self._has_axis else 1
        self.saturate = bool(node.attr("saturate", 1)) if self._has_saturate else True
        self.block_size = int(node.attr("block_size", 0)) if self._has_block else 0
        if self.block_size < 0:
            raise self.fail(f"block_size must be >= 0, got {self.block_size}")
        code = int(node.attr("output_dtype", 0)) if self._has_block else 0
        self.output_dtype = dtype_from_attr(code) if code else None
        zp_dt = node.dtype(2) if node.present(2) else None
        if self.output_dtype is not None and zp_dt is not None and np.dtype(zp_dt) != self.output_dtype:
            raise self.fail(
                f"output_dtype {self.output_dtype} does not match y_zero_point type {np.dtype(zp_dt)}"
            )
        prec = int(node.attr("precision", 0)) if self._has_precision else 0
        self.precision = dtype_from_attr(prec) if prec else None
        if self.precision is not None and not is_float_type(self.precision):
            raise self.fail(f"precision must be a floating type, got {self.precision}")

    def __call__(self, x: np.ndarray, y_scale: np.ndarray, y_zero_point: np.ndarray | None = None) -> Sequence[Any]:
        x = np.asarray(x)
        y_scale = np.asarray(y_scale)
        if y_zero_point is not None:
            y_zero_point = np.asarray(y_zero_point)
            out_dt = y_zero_point.dtype
            if self.output_dtype is not None and out_dt != self.output_dtype:
                raise self.fail(f"output_dtype {self.output_dtype} does not match y_zero_point type {out_dt}")
            if y_zero_point.shape != y_scale.shape and not (y_zero_point.size == 1 and y_scale.size == 1):
                raise self.fail(
                    f"y_zero_point shape {y_zero_point.shape} must equal y_scale shape {y_scale.shape}"
                )
        else:
            out_dt = self.output_dtype if self.output_dtype is not None else np.dtype(np.uint8)
        if not (is_int_type(out_dt) or is_float_type(out_dt)) or out_dt in (np.dtype(np.int32), np.dtype(np.int64)):
            raise self.fail(f"unsupported quantized output type {out_dt}")
        if not self._has_axis and y_scale.size != 1:
            raise self.fail(f"y_scale must be a scalar in opset < 13 (got shape {y_scale.shape})")

        axis = self.axis
        scale = expand_param(y_scale, x.shape, axis, self.block_size, self.fail, "y_scale")
        prec = arith_float(self.precision if self.precision is not None else y_scale.dtype)
        q = x.astype(prec) / scale.astype(prec)
        if is_int_type(out_dt):
            q = np.rint(q).astype(np.float64)
            if y_zero_point is not None:
                zp = expand_param(y_zero_point, x.shape, axis, self.block_size, self.fail, "y_zero_point")
                q = q + zp.astype(np.float64)
            return (saturate_cast(q, out_dt),)
        q = q.astype(np.float32)
        if y_zero_point is not None:
            zp = expand_param(y_zero_point, x.shape, axis, self.block_size, self.fail, "y_zero_point")
            q = q + zp.astype(np.float32)
        return (saturate_cast(q, out_dt, self.saturate),)


@register
class QuantizeLinear10(_QuantizeLinearBase):
    since_version = 10


@register
class QuantizeLinear13(_QuantizeLinearBase):
    since_version = 13
    _has_axis = True


@register
class QuantizeLinear19(_QuantizeLinearBase):
    since_version = 19
    _has_axis = True
    _has_saturate = True


@register
class QuantizeLinear21(_QuantizeLinearBase):
    since_version = 21
    _has_axis = True
    _has_saturate = True
    _has_block = True


@register
class QuantizeLinear23(_QuantizeLinearBase):
    since_version = 23
    _has_axis = True
    _has_saturate = True
    _has_block = True
    _has_precision = True
