"""PRelu: ``x if x >= 0 else slope * x``; slope broadcasts unidirectionally to x
(opsets < 7: per-channel slope of shape (C,) aligned at axis 1 as well)."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, register


@register
class PRelu(Kernel):
    op_type = "PRelu"
    since_version = 1

    def __call__(self, x: np.ndarray, slope: np.ndarray) -> tuple[np.ndarray]:
        if slope.ndim == 1 and x.ndim > 2 and slope.shape[0] == x.shape[1] and slope.shape[0] != x.shape[-1]:
            slope = slope.reshape((-1,) + (1,) * (x.ndim - 2))
        try:
            return (np.where(x < 0, x * slope, x).astype(x.dtype, copy=False),)
        except ValueError:
            raise self.fail(f"slope of shape {slope.shape} does not broadcast to {x.shape}") from None
