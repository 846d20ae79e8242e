"""MatMul (numpy ``matmul`` semantics, including 1-D promotion).  float16 and
ml_dtypes inputs (bfloat16...) are multiplied in float32 and rounded back.
Large float products are split over the idle cores (:func:`nnrt_numpy.parallel.matmul`:
BLAS runs single-threaded inside a partition's run)."""
from __future__ import annotations

import numpy as np

from ... import parallel
from ...kernel import Kernel, register
from ...limits import may_exceed


@register
class MatMul(Kernel):
    op_type = "MatMul"
    since_version = 1

    def __call__(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
        if a.ndim == 0 or b.ndim == 0:
            raise self.fail("MatMul inputs must have rank >= 1")
        try:
            if may_exceed(a, b) and a.shape[-1:] == b.shape[-2 if b.ndim > 1 else 0:][:1]:
                # [n, 1] x [1, m]: the output can be far larger than the inputs; checked before numpy allocates
                batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
                self.check_alloc(batch + a.shape[-2:-1] + b.shape[-1:] * (b.ndim > 1), a.dtype)
            if a.dtype.kind == "V" or a.dtype == np.float16:  # no BLAS: multiply in float32
                return (np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype),)
            if b.ndim > 1 and parallel.worth_splitting(parallel.work_us("gemm", max(
                    a.size * b.shape[-1], b.size * a.shape[-2 if a.ndim > 1 else 0]))):  # (a cheap estimate first)
                return (parallel.matmul(a, b),)  # split when a core is idle
            return (np.matmul(a, b),)
        except ValueError as e:
            raise self.fail(f"incompatible shapes {a.shape} and {b.shape}") from None
