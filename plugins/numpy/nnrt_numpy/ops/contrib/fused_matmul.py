"""FusedMatMul / TransposeMatMul (com.microsoft): ``alpha * op(A) @ op(B)``
where ``op`` may transpose the last two axes (``transA``/``transB``) or move
the first axis to the end of the batch axes (``transBatchA``/``transBatchB``)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy import parallel
from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._util import MS


def _prep(x: np.ndarray, trans: bool, trans_batch: bool) -> np.ndarray:
    if x.ndim < 2:
        return x
    if trans_batch and x.ndim > 2:
        # (d0, d1, ..., dn-2, dn-1) -> (d1, ..., dn-2, d0, dn-1)
        x = np.moveaxis(x, 0, -2)
    if trans:
        x = np.swapaxes(x, -1, -2)
    return x


class _FusedMatMulBase(Kernel):
    domain = MS
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.alpha = float(node.attr("alpha", 1.0))
        self.ta = bool(node.attr("transA", 0))
        self.tb = bool(node.attr("transB", 0))
        self.tba = bool(node.attr("transBatchA", 0))
        self.tbb = bool(node.attr("transBatchB", 0))

    def __call__(self, a, b) -> Sequence[Any]:
        a = _prep(np.asarray(a), self.ta, self.tba)
        b = _prep(np.asarray(b), self.tb, self.tbb)
        try:
            y = parallel.matmul(a, b)  # split over idle cores when large enough
        except ValueError as e:
            raise self.fail(f"incompatible shapes {a.shape} @ {b.shape}: {e}") from None
        if self.alpha != 1.0:
            y = y * np.asarray(self.alpha, dtype=y.dtype)
        return (y,)


@register
class FusedMatMul(_FusedMatMulBase):
    op_type = "FusedMatMul"


@register
class TransposeMatMul(_FusedMatMulBase):
    op_type = "TransposeMatMul"
