"""MatMulIntegerToFloat (com.microsoft):
``Y = ((A - a_zp) @ (B - b_zp)) * a_scale * b_scale + bias`` in float;
``b`` parameters may be per column."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, register

from ..quant._common import arith_float
from ..quant._imatmul import col_param, int_matmul
from ._util import MS, scalar


@register
class MatMulIntegerToFloat(Kernel):
    op_type = "MatMulIntegerToFloat"
    domain = MS
    since_version = 1

    def __call__(self, a, b, a_scale, b_scale, a_zp=None, b_zp=None, bias=None) -> Sequence[Any]:
        a = np.asarray(a)
        b = np.asarray(b)
        ai = a.astype(np.int64)
        bi = b.astype(np.int64)
        if a_zp is not None:
            ai = ai - int(scalar(a_zp, self.fail, "a_zero_point"))
        if b_zp is not None:
            bi = bi - col_param(b_zp, b, self.fail, "b_zero_point").astype(np.int64)
        acc = int_matmul(ai, bi, self.fail)
        out_dt = arith_float(np.asarray(a_scale).dtype)
        sa = np.asarray(a_scale, dtype=np.float32)
        if sa.size != 1:
            raise self.fail("a_scale must be a scalar")
        scale = sa.reshape(()) * col_param(np.asarray(b_scale, dtype=np.float32), b, self.fail, "b_scale")
        y = acc.astype(np.float32) * scale
        if bias is not None:
            y = y + np.asarray(bias, dtype=np.float32)
        return (y.astype(out_dt),)
