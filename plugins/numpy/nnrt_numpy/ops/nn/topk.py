"""TopK: the k largest (or smallest) values along ``axis`` and their int64
indices; equal values keep the lower index first.  ``k`` is an attribute in
opset 1 and an input from 10; ``largest``/``sorted`` from 11."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


class _TopKBase(Kernel):
    op_type = "TopK"

    def _setup(self, node: NodeInfo) -> None:
        self.axis = int(node.attr("axis", -1))
        self.largest = bool(node.attr("largest", 1))
        self.k_attr = node.attr("k")

    def topk(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        r = x.ndim
        if not -r <= self.axis < r:
            raise self.fail(f"axis {self.axis} out of range for rank {r}")
        a = self.axis % r
        n = x.shape[a]
        if not 0 <= k <= n:
            raise self.fail(f"k={k} must be in [0, {n}]")
        if self.largest:
            order = np.argsort(np.flip(x, a), axis=a, kind="stable")
            idx = (n - 1 - np.flip(order, a))
        else:
            idx = np.argsort(x, axis=a, kind="stable")
        idx = np.take(idx, np.arange(k), axis=a)
        return np.take_along_axis(x, idx, axis=a), idx.astype(np.int64)


@register
class TopK1(_TopKBase):
    since_version = 1

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.k_attr is None:
            raise self.fail("attribute k is required")
        return self.topk(x, int(self.k_attr))


@register
class TopK10(_TopKBase):
    since_version = 10

    def __call__(self, x: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if k.size != 1:
            raise self.fail("k must be a single-element tensor")
        return self.topk(x, int(k.reshape(-1)[0]))
