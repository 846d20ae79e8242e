"""InstanceNormalization: normalize each (sample, channel) over the spatial axes."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from ._norm import normalize


@register
class InstanceNormalization(Kernel):
    op_type = "InstanceNormalization"
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.epsilon = float(node.attr("epsilon", 1e-5))

    def __call__(self, x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray]:
        if x.ndim < 3:
            raise self.fail("input must have rank >= 3")
        y, _, _ = normalize(x, tuple(range(2, x.ndim)), self.epsilon)
        shape = (1, -1) + (1,) * (x.ndim - 2)
        y *= scale.reshape(shape).astype(x.dtype)
        y += bias.reshape(shape).astype(x.dtype)
        return (y,)
