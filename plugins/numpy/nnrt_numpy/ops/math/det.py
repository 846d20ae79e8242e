"""Det: determinant of the trailing square matrices (``np.linalg.det``)."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, register


@register
class Det(Kernel):
    op_type = "Det"
    since_version = 11

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
            raise self.fail(f"input must end in square matrices, got {x.shape}")
        return (np.linalg.det(x).astype(x.dtype, copy=False),)
