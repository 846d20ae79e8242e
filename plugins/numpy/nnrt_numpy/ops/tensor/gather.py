"""Gather: ``np.take`` along ``axis``; negative indices count from the end."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from ._util import norm_axis


@register
class Gather(Kernel):
    op_type = "Gather"
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.axis = int(node.attr("axis", 0))

    def __call__(self, data: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray]:
        axis = norm_axis(self.axis, data.ndim)
        if axis is None:
            raise self.fail(f"axis {self.axis} out of range for rank {data.ndim}")
        if indices.dtype.kind not in "iu":
            raise self.fail("indices must be an integer tensor")
        try:
            return (np.take(data, indices, axis=axis),)
        except IndexError:
            n = data.shape[axis]
            raise self.fail(f"indices out of range [-{n}, {n - 1}] for axis {axis}") from None
