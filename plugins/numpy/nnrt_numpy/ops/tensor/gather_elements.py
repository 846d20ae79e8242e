"""GatherElements: ``np.take_along_axis`` with negative-index support."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from ._util import norm_axis


def fix_indices(kernel: Kernel, idx: np.ndarray, n: int) -> np.ndarray:
    """Map negative indices to ``idx + n``; fail on anything outside ``[-n, n)``."""
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise kernel.fail(f"indices out of range [-{n}, {n - 1}]")
    return np.where(idx < 0, idx + n, idx) if idx.size and idx.min() < 0 else idx


@register
class GatherElements(Kernel):
    op_type = "GatherElements"
    since_version = 11

    def _setup(self, node: NodeInfo) -> None:
        self.axis = int(node.attr("axis", 0))

    def __call__(self, data: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray]:
        axis = norm_axis(self.axis, data.ndim)
        if axis is None:
            raise self.fail(f"axis {self.axis} out of range for rank {data.ndim}")
        if indices.ndim != data.ndim:
            raise self.fail("indices must have the same rank as data")
        if any(i > d for k, (i, d) in enumerate(zip(indices.shape, data.shape)) if k != axis):
            raise self.fail(f"indices shape {indices.shape} exceeds data shape {data.shape} outside axis {axis}")
        idx = fix_indices(self, indices, data.shape[axis])
        if indices.shape != data.shape:  # indices may cover a corner of data on the other axes
            data = data[tuple(slice(None) if k == axis else slice(0, n) for k, n in enumerate(indices.shape))]
        return (np.take_along_axis(data, idx.astype(np.intp, copy=False), axis=axis),)
