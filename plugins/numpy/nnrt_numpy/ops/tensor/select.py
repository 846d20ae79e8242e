"""NonZero and Compress."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


@register
class NonZero(Kernel):
    op_type = "NonZero"
    since_version = 9

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        if x.ndim == 0:
            return (np.zeros((0, int(bool(x))), dtype=np.int64),)
        return (np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1),)


@register
class Compress(Kernel):
    op_type = "Compress"
    since_version = 9

    def _setup(self, node: NodeInfo) -> None:
        axis = node.attr("axis")
        self.axis = None if axis is None else int(axis)

    def __call__(self, x: np.ndarray, cond: np.ndarray) -> tuple[np.ndarray]:
        c = cond.reshape(-1).astype(bool)
        if self.axis is None:
            flat = x.reshape(-1)
            return (flat[: c.size][c[: flat.size]],)
        r = x.ndim
        if not -r <= self.axis < r:
            raise self.fail(f"axis {self.axis} out of range for rank {r}")
        axis = self.axis % r
        if c.size > x.shape[axis]:
            c = c[: x.shape[axis]]
        return (np.compress(c, x, axis=axis),)
