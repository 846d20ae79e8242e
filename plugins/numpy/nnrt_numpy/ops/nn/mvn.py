"""MeanVarianceNormalization: ``(x - mean) / (std + 1e-9)`` over ``axes`` (default [0, 2, 3])."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


@register
class MeanVarianceNormalization(Kernel):
    op_type = "MeanVarianceNormalization"
    since_version = 9

    def _setup(self, node: NodeInfo) -> None:
        self.axes = tuple(int(a) for a in node.attr("axes", [0, 2, 3]))

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        r = x.ndim
        if any(not -r <= a < r for a in self.axes):
            raise self.fail(f"axes {list(self.axes)} out of range for rank {r}")
        axes = tuple(a % r for a in self.axes)
        mean = x.mean(axis=axes, keepdims=True)
        d = x - mean
        std = np.sqrt(np.mean(d * d, axis=axes, keepdims=True))
        return ((d / (std + x.dtype.type(1e-9))).astype(x.dtype, copy=False),)
