"""Relu (all versions)."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, register
from ...ufuncs import clip


@register
class Relu(Kernel):
    op_type = "Relu"
    since_version = 1

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        if x.dtype.kind == "f" and x.dtype.itemsize >= 4:  # clip: one SIMD pass, 2-2.6x faster than maximum(x, 0)
            t = x.dtype.type
            return (clip(x, t(0), t(np.inf)),)
        return (np.maximum(x, x.dtype.type(0)),)
