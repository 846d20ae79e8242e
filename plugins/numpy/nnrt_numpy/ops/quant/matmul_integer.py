"""MatMulInteger: ``(A - a_zero_point) @ (B - b_zero_point)`` with int32 output.

``a_zero_point`` is a scalar or per-row (1-D, one per row of A);
``b_zero_point`` is a scalar or per-column (1-D, one per column of B).
Constant ``B`` (weights) is converted once at compile time and multiplied
exactly in float32 (:func:`._imatmul.exact_product`).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, dtypes, register

from ._imatmul import col_param, const_weights, exact_product, int_matmul, range_absmax, row_param


@register
class MatMulInteger(Kernel):
    op_type = "MatMulInteger"
    since_version = 10
    input_dtypes = dtypes(np.int8, np.uint8)

    def _setup(self, node: NodeInfo) -> None:
        b, zp = node.const(1), node.const(3)
        same_type = zp is None or b is None or zp.dtype == b.dtype
        self.weights = const_weights(b, zp, node.present(3), self.fail) if same_type else None

    def __call__(
        self,
        a: np.ndarray,
        b: np.ndarray,
        a_zero_point: np.ndarray | None = None,
        b_zero_point: np.ndarray | None = None,
    ) -> Sequence[Any]:
        return (self.accumulate(a, b, a_zero_point, b_zero_point).astype(np.int32),)

    def accumulate(
        self,
        a: np.ndarray,
        b: np.ndarray,
        a_zero_point: np.ndarray | None = None,
        b_zero_point: np.ndarray | None = None,
    ) -> np.ndarray:
        """The exact products ``(A - a_zp) @ (B - b_zp)``: integer-valued float32
        or float64 (constant ``B``, :func:`exact_product`) or int64."""
        a = np.asarray(a)
        b = np.asarray(b)
        if a.ndim == 0 or b.ndim == 0:
            raise self.fail("MatMulInteger inputs must have rank >= 1")
        if a_zero_point is not None and np.asarray(a_zero_point).dtype != a.dtype:
            raise self.fail("a_zero_point must have the type of A")
        if b_zero_point is not None and np.asarray(b_zero_point).dtype != b.dtype:
            raise self.fail("b_zero_point must have the type of B")
        a_zp = None if a_zero_point is None else row_param(a_zero_point, a, self.fail, "a_zero_point")
        if self.weights is not None and a.ndim >= 2 and a.shape[-1] == self.weights.k:
            if a_zp is None:
                af = a.astype(np.float32)
            else:  # one pass: (A - a_zp) straight into float32 (exact: both are 8-bit integers)
                af = np.subtract(a, a_zp.astype(np.float32), dtype=np.float32)
            return exact_product(af, range_absmax(a.dtype, a_zp), self.weights)
        ai = a.astype(np.int64)
        bi = b.astype(np.int64)
        if a_zp is not None:
            ai = ai - a_zp.astype(np.int64)
        if b_zero_point is not None:
            bi = bi - col_param(b_zero_point, b, self.fail, "b_zero_point").astype(np.int64)
        return int_matmul(ai, bi, self.fail)
