"""Relu (all versions)."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, register


@register
class Relu(Kernel):
    op_type = "Relu"
    since_version = 1

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        return (np.maximum(x, x.dtype.type(0)),)
