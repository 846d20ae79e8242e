"""EyeLike: a 2-D identity-like tensor with ones on diagonal ``k``."""
from __future__ import annotations

import numpy as np

from nnrt_core.ir.dtypes import DataType

from ...kernel import Kernel, NodeInfo, register


@register
class EyeLike(Kernel):
    op_type = "EyeLike"
    since_version = 9

    def _setup(self, node: NodeInfo) -> None:
        self.k = int(node.attr("k", 0))
        dt = node.attr("dtype")
        self.dtype = None if dt is None else DataType(int(dt)).numpy

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        if x.ndim != 2:
            raise self.fail("input must be 2-D")
        return (np.eye(x.shape[0], x.shape[1], k=self.k, dtype=self.dtype or x.dtype),)
