"""OneHot: ``values[1]`` where index == position along ``axis``, ``values[0]`` elsewhere;
negative indices count from ``depth``."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from ._util import int_list


@register
class OneHot(Kernel):
    op_type = "OneHot"
    since_version = 9

    def _setup(self, node: NodeInfo) -> None:
        self.axis = int(node.attr("axis", -1))

    def __call__(self, indices: np.ndarray, depth: np.ndarray, values: np.ndarray) -> tuple[np.ndarray]:
        if depth.size != 1 or values.size != 2:
            raise self.fail("depth must be a scalar and values a 2-element tensor")
        d = int_list(depth)[0]
        if d < 1:
            raise self.fail("depth must be positive")
        r = indices.ndim + 1
        if not -r <= self.axis < r:
            raise self.fail(f"axis {self.axis} out of range for output rank {r}")
        axis = self.axis % r
        self.check_alloc(indices.shape[:axis] + (d,) + indices.shape[axis:], values.dtype)
        idx = indices.astype(np.int64)
        idx = np.where(idx < 0, idx + d, idx)
        shape = [1] * r
        shape[axis] = d
        hot = np.expand_dims(idx, axis) == np.arange(d).reshape(shape)
        vals = values.reshape(-1)
        return (np.where(hot, vals[1], vals[0]),)
