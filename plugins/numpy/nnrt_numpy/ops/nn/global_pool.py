"""GlobalAveragePool, GlobalMaxPool and GlobalLpPool: reduce all spatial axes."""
from __future__ import annotations

import math

import numpy as np

from ...kernel import Kernel, NodeInfo, register


def _spatial_axes(x: np.ndarray) -> tuple[int, ...]:
    return tuple(range(2, x.ndim))


@register
class GlobalAveragePool(Kernel):
    op_type = "GlobalAveragePool"
    since_version = 1

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        if x.ndim <= 2:
            return (x.copy(),)
        n, c = x.shape[:2]
        size = math.prod(x.shape[2:])
        if x.dtype.kind != "f" or not size:
            y = x.reshape(n, c, size).mean(axis=-1, dtype=x.dtype)
        else:  # what ``mean`` does (a sum, then a division by the count) without its Python-level steps
            y = np.add.reduce(x.reshape(n, c, size), axis=-1)
            np.true_divide(y, size, out=y)
        return (y.reshape((n, c) + (1,) * (x.ndim - 2)),)


@register
class GlobalMaxPool(Kernel):
    op_type = "GlobalMaxPool"
    since_version = 1

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        if x.ndim <= 2:
            return (x.copy(),)
        return (x.max(axis=_spatial_axes(x), keepdims=True),)


@register
class GlobalLpPool(Kernel):
    op_type = "GlobalLpPool"
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.p = float(node.attr("p", 2))
        if not self.p > 0 or not np.isfinite(self.p):
            raise self.fail(f"p must be a positive integer, got {node.attr('p')}")

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        p = x.dtype.type(self.p)
        s = (np.abs(x) ** p).sum(axis=_spatial_axes(x), keepdims=True)
        return ((s ** x.dtype.type(1.0 / self.p)).astype(x.dtype, copy=False),)
