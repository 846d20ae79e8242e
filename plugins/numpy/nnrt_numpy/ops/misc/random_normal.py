"""RandomNormal / RandomNormalLike (opsets 1, 22): samples of N(mean, scale^2)
with a static ``shape`` attribute or the shape of the input tensor."""
from __future__ import annotations

import numpy as np

from nnrt_numpy.kernel import NodeInfo, register

from ._random import RandomFromShape, RandomLike


class _Normal:
    def _params(self, node: NodeInfo) -> None:
        self.mean = float(node.attr("mean", 0.0))
        self.scale = float(node.attr("scale", 1.0))
        if not (np.isfinite(self.mean) and np.isfinite(self.scale)) or self.scale < 0:
            raise self.fail(f"mean ({self.mean}) must be finite and scale ({self.scale}) finite and >= 0")

    def _draw(self, shape: tuple[int, ...]) -> np.ndarray:
        return self.rng.normal(self.mean, self.scale, shape)


@register
class RandomNormal(_Normal, RandomFromShape):
    op_type = "RandomNormal"
    since_version = 1


@register
class RandomNormalLike(_Normal, RandomLike):
    op_type = "RandomNormalLike"
    since_version = 1
