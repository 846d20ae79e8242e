"""LpNormalization: divide by the L1 or L2 norm along ``axis`` (a zero norm gives 0)."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


@register
class LpNormalization(Kernel):
    op_type = "LpNormalization"
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.axis = int(node.attr("axis", -1))
        self.p = int(node.attr("p", 2))
        if self.p not in (1, 2):
            raise self.fail("p must be 1 or 2")

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        r = x.ndim
        if not -r <= self.axis < r:
            raise self.fail(f"axis {self.axis} out of range for rank {r}")
        a = self.axis % r
        if self.p == 1:
            norm = np.sum(np.abs(x), axis=a, keepdims=True)
        else:
            norm = np.sqrt(np.sum(x * x, axis=a, keepdims=True))
        with np.errstate(all="ignore"):
            y = np.where(norm == 0, x.dtype.type(0), x / norm)
        return (y.astype(x.dtype, copy=False),)
