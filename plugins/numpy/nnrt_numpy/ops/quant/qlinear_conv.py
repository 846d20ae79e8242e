"""QLinearConv: quantized convolution with int32 bias and requantization.

``y = saturate(round(conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale / y_scale) + y_zp)``;
``w_scale`` / ``w_zero_point`` may be per output channel.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, dtypes, register

from ._common import arith_float, saturate_cast
from ._conv import conv_nd, parse_conv_attrs
from .conv_integer import channel_param


@register
class QLinearConv(Kernel):
    op_type = "QLinearConv"
    since_version = 10
    input_dtypes = dtypes(np.int8, np.uint8)

    def _setup(self, node: NodeInfo) -> None:
        self.attrs = parse_conv_attrs(node, self.fail)

    def __call__(self, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B=None) -> Sequence[Any]:
        x = np.asarray(x)
        w = np.asarray(w)
        m = w.shape[0]
        xf = x.astype(np.float64)
        wf = w.astype(np.float64)
        if x_zero_point is not None:
            zp = np.asarray(x_zero_point)
            if zp.size != 1:
                raise self.fail("x_zero_point must be a scalar")
            xf = xf - float(zp.reshape(()))
        if w_zero_point is not None:
            wf = wf - channel_param(w_zero_point, m, w.ndim, self.fail, "w_zero_point").astype(np.float64)
        acc = np.rint(conv_nd(xf, wf, self.attrs, self.fail))
        spatial = (1,) * (x.ndim - 2)
        if B is not None:
            b = np.asarray(B)
            if b.shape != (m,):
                raise self.fail(f"bias must have shape ({m},), got {b.shape}")
            acc = acc + b.astype(np.float64).reshape((m,) + spatial)
        comp = arith_float(np.asarray(x_scale).dtype)
        xs = np.asarray(x_scale)
        ys = np.asarray(y_scale)
        if xs.size != 1 or ys.size != 1:
            raise self.fail("x_scale and y_scale must be scalars")
        ws = channel_param(w_scale, m, 1, self.fail, "w_scale").astype(comp)
        mult = (xs.reshape(()).astype(comp) * ws / ys.reshape(()).astype(comp)).astype(np.float64)
        d = np.rint(acc * mult.reshape((-1,) + spatial if mult.ndim else ()))
        out_dt = np.asarray(y_zero_point).dtype if y_zero_point is not None else x.dtype
        if y_zero_point is not None:
            yz = np.asarray(y_zero_point)
            if yz.size != 1:
                raise self.fail("y_zero_point must be a scalar")
            d = d + yz.reshape(()).astype(np.float64)
        return (saturate_cast(d, out_dt),)
