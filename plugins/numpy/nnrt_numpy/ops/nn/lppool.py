"""LpPool (all versions): ``(sum |x|^p over the window) ^ (1/p)``."""
from __future__ import annotations

import numpy as np

from ...kernel import NodeInfo, register
from ._pool import PoolBase
from ._spatial import pad_spatial, window_reduce


@register
class LpPool(PoolBase):
    op_type = "LpPool"
    since_version = 1

    def _setup_pool(self, node: NodeInfo) -> None:
        self.p = float(node.attr("p", 2))
        if not self.p > 0 or not np.isfinite(self.p):
            raise self.fail(f"p must be a positive integer, got {node.attr('p')}")

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        begin, end, out, extra = self.geometry(x.shape)
        xp = pad_spatial(np.abs(x) ** x.dtype.type(self.p), begin, [e + x_ for e, x_ in zip(end, extra)], 0)
        y = window_reduce(xp, self.kernel, self.strides, self.dilations, out, np.add)
        return (y ** x.dtype.type(1.0 / self.p),)
