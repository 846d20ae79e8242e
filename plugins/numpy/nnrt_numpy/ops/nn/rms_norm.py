"""RMSNormalization (opset 23): ``x / sqrt(mean(x^2 over [axis, rank)) + eps) * scale``."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from ._norm import stash_dtype


@register
class RMSNormalization(Kernel):
    op_type = "RMSNormalization"
    since_version = 23

    def _setup(self, node: NodeInfo) -> None:
        self.axis = int(node.attr("axis", -1))
        self.epsilon = float(node.attr("epsilon", 1e-5))
        self.stash_type = int(node.attr("stash_type", 1))

    def __call__(self, x: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray]:
        r = x.ndim
        if not -r <= self.axis < r:
            raise self.fail(f"axis {self.axis} out of range for rank {r}")
        axes = tuple(range(self.axis % r, r))
        xc = x.astype(stash_dtype(x, self.stash_type), copy=False)
        rms = np.sqrt(np.mean(np.square(xc), axis=axes, keepdims=True) + xc.dtype.type(self.epsilon))
        return (((xc / rms).astype(x.dtype, copy=False) * scale).astype(x.dtype, copy=False),)
