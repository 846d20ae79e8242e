"""RandomUniform / RandomUniformLike (opsets 1, 22): samples of U[low, high)
with a static ``shape`` attribute or the shape of the input tensor."""
from __future__ import annotations

import numpy as np

from nnrt_numpy.kernel import NodeInfo, register

from ._random import RandomFromShape, RandomLike


class _Uniform:
    def _params(self, node: NodeInfo) -> None:
        self.low = float(node.attr("low", 0.0))
        self.high = float(node.attr("high", 1.0))
        if not (np.isfinite(self.low) and np.isfinite(self.high)):
            raise self.fail(f"low ({self.low}) and high ({self.high}) must be finite")
        if self.high < self.low:
            raise self.fail(f"high ({self.high}) must not be below low ({self.low})")

    def _draw(self, shape: tuple[int, ...]) -> np.ndarray:
        return self.rng.uniform(self.low, self.high, shape)


@register
class RandomUniform(_Uniform, RandomFromShape):
    op_type = "RandomUniform"
    since_version = 1


@register
class RandomUniformLike(_Uniform, RandomLike):
    op_type = "RandomUniformLike"
    since_version = 1
