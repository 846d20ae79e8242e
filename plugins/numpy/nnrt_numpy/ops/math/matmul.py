"""MatMul (numpy ``matmul`` semantics, including 1-D promotion)."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, register


@register
class MatMul(Kernel):
    op_type = "MatMul"
    since_version = 1

    def __call__(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
        if a.ndim == 0 or b.ndim == 0:
            raise self.fail("MatMul inputs must have rank >= 1")
        try:
            return (np.matmul(a, b),)
        except ValueError as e:
            raise self.fail(f"incompatible shapes {a.shape} and {b.shape}") from None
