"""QGemm (com.microsoft): quantized Gemm.

``Y = alpha * a_scale * b_scale * ((A' - a_zp) @ (B' - b_zp) + C)`` where C is
int32 quantized with scale ``alpha * a_scale * b_scale``; the result is float32
or, with ``y_scale``, requantized to the type of ``y_zero_point``.
``b_scale`` / ``b_zero_point`` may be per column of ``B'``."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ..quant._common import saturate_cast
from ..quant._imatmul import col_param, int_matmul
from ._util import MS, scalar


@register
class QGemm(Kernel):
    op_type = "QGemm"
    domain = MS
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.alpha = float(node.attr("alpha", 1.0))
        self.ta = bool(node.attr("transA", 0))
        self.tb = bool(node.attr("transB", 0))

    def __call__(self, a, a_scale, a_zp, b, b_scale, b_zp=None, c=None, y_scale=None, y_zp=None) -> Sequence[Any]:
        a = np.asarray(a)
        b = np.asarray(b)
        if a.ndim != 2 or b.ndim != 2:
            raise self.fail(f"A and B must be 2-D, got {a.shape}, {b.shape}")
        a2 = a.T if self.ta else a
        b2 = b.T if self.tb else b
        ai = a2.astype(np.int64) - int(scalar(a_zp, self.fail, "a_zero_point"))
        bi = b2.astype(np.int64)
        if b_zp is not None:
            bi = bi - col_param(b_zp, b2, self.fail, "b_zero_point").astype(np.int64)
        acc = int_matmul(ai, bi, self.fail).astype(np.float64)
        if c is not None:
            acc = acc + np.asarray(c).astype(np.float64)
        mult = (np.float32(self.alpha) * np.float32(scalar(a_scale, self.fail, "a_scale"))
                * col_param(np.asarray(b_scale, dtype=np.float32), b2, self.fail, "b_scale"))
        y = acc * mult.astype(np.float64)
        if y_scale is None:
            return (y.astype(np.float32),)
        ys = scalar(y_scale, self.fail, "y_scale")
        q = np.rint((y / ys).astype(np.float32)).astype(np.float64) + scalar(y_zp, self.fail, "y_zero_point")
        out_dt = np.asarray(y_zp).dtype if y_zp is not None else a.dtype
        return (saturate_cast(q, out_dt),)
