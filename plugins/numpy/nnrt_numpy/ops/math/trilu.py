"""Trilu: keep the upper (``upper=1``) or lower triangle of the last two dims,
shifted by the optional diagonal offset ``k``."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


@register
class Trilu(Kernel):
    op_type = "Trilu"
    since_version = 14

    def _setup(self, node: NodeInfo) -> None:
        self.upper = bool(node.attr("upper", 1))

    def __call__(self, x: np.ndarray, k: np.ndarray | None = None) -> tuple[np.ndarray]:
        if x.ndim < 2:
            raise self.fail("input must have rank >= 2")
        kk = 0 if k is None else int(k.reshape(()))
        return ((np.triu if self.upper else np.tril)(x, kk),)
