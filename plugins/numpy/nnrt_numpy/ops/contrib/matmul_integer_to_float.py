"""MatMulIntegerToFloat (com.microsoft):
``Y = ((A - a_zp) @ (B - b_zp)) * a_scale * b_scale + bias`` in float;
``b`` parameters may be per column. Constant ``B`` is converted once and
multiplied exactly in float32 (:func:`..quant._imatmul.exact_product`)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ..quant._common import arith_float
from ..quant._imatmul import col_param, const_weights, dequantized, exact_product, int_matmul, range_absmax
from ._util import MS, scalar


@register
class MatMulIntegerToFloat(Kernel):
    op_type = "MatMulIntegerToFloat"
    domain = MS
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.weights = const_weights(node.const(1), node.const(5), node.present(5), self.fail)

    def __call__(self, a, b, a_scale, b_scale, a_zp=None, b_zp=None, bias=None) -> Sequence[Any]:
        a = np.asarray(a)
        b = np.asarray(b)
        zp = 0 if a_zp is None else int(scalar(a_zp, self.fail, "a_zero_point"))
        if self.weights is not None and a.ndim >= 2 and a.shape[-1] == self.weights.k:
            af = np.subtract(a, np.float32(zp), dtype=np.float32) if zp else a.astype(np.float32)
            acc = exact_product(af, range_absmax(a.dtype, zp), self.weights)
        else:
            bi = b.astype(np.int64)
            if b_zp is not None:
                bi = bi - col_param(b_zp, b, self.fail, "b_zero_point").astype(np.int64)
            acc = int_matmul(a.astype(np.int64) - zp, bi, self.fail)
        out_dt = arith_float(np.asarray(a_scale).dtype)
        sa = np.asarray(a_scale, dtype=np.float32)
        if sa.size != 1:
            raise self.fail("a_scale must be a scalar")
        scale = sa.reshape(()) * col_param(np.asarray(b_scale, dtype=np.float32), b, self.fail, "b_scale")
        return (dequantized(acc, scale, bias).astype(out_dt, copy=False),)
