"""Unique: values (sorted or in first-occurrence order), first indices, inverse
indices and counts, over the flattened tensor or along ``axis``."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


@register
class Unique(Kernel):
    op_type = "Unique"
    since_version = 11

    def _setup(self, node: NodeInfo) -> None:
        axis = node.attr("axis")
        self.axis = None if axis is None else int(axis)
        self.sorted = bool(node.attr("sorted", 1))

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, ...]:
        axis = None
        if self.axis is not None:
            if not -x.ndim <= self.axis < x.ndim:
                raise self.fail(f"axis {self.axis} out of range for rank {x.ndim}")
            axis = self.axis % x.ndim
        y, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                              return_counts=True, axis=axis)
        inverse = inverse.reshape(-1)
        if not self.sorted:
            order = np.argsort(first, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            y = np.take(y, order, axis=0 if axis is None else axis)
            first, counts, inverse = first[order], counts[order], rank[inverse]
        i64 = np.int64
        return (y, first.astype(i64), inverse.astype(i64), counts.astype(i64))
