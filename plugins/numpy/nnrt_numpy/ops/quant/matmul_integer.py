"""MatMulInteger: ``(A - a_zero_point) @ (B - b_zero_point)`` with int32 output.

``a_zero_point`` is a scalar or per-row (1-D, one per row of A);
``b_zero_point`` is a scalar or per-column (1-D, one per column of B).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, dtypes, register

from ._imatmul import int_matmul, row_param, col_param


@register
class MatMulInteger(Kernel):
    op_type = "MatMulInteger"
    since_version = 10
    input_dtypes = dtypes(np.int8, np.uint8)

    def __call__(
        self,
        a: np.ndarray,
        b: np.ndarray,
        a_zero_point: np.ndarray | None = None,
        b_zero_point: np.ndarray | None = None,
    ) -> Sequence[Any]:
        a = np.asarray(a)
        b = np.asarray(b)
        if a.ndim == 0 or b.ndim == 0:
            raise self.fail("MatMulInteger inputs must have rank >= 1")
        ai = a.astype(np.int64)
        bi = b.astype(np.int64)
        if a_zero_point is not None:
            if np.asarray(a_zero_point).dtype != a.dtype:
                raise self.fail("a_zero_point must have the type of A")
            ai = ai - row_param(a_zero_point, a, self.fail, "a_zero_point").astype(np.int64)
        if b_zero_point is not None:
            if np.asarray(b_zero_point).dtype != b.dtype:
                raise self.fail("b_zero_point must have the type of B")
            bi = bi - col_param(b_zero_point, b, self.fail, "b_zero_point").astype(np.int64)
        return (int_matmul(ai, bi, self.fail).astype(np.int32),)
