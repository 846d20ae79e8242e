"""Where: select from X or Y by a bool condition (numpy broadcasting)."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, register


@register
class Where(Kernel):
    op_type = "Where"
    since_version = 9

    def __call__(self, cond: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray]:
        try:
            return (np.where(cond, x, y),)
        except ValueError:
            raise self.fail(f"shapes {cond.shape}, {x.shape}, {y.shape} are not broadcastable") from None
