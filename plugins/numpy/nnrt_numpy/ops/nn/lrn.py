"""LRN: local response normalization across channels.

``y = x / (bias + alpha / size * sum_{window} x^2) ^ beta`` with the window
``[c - floor((size-1)/2), c + ceil((size-1)/2)]`` over axis 1.
"""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


@register
class LRN(Kernel):
    op_type = "LRN"
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.size = node.attr("size")
        if self.size is None or int(self.size) < 1:
            raise self.fail("attribute size is required and must be >= 1")
        self.size = int(self.size)
        self.alpha = float(node.attr("alpha", 1e-4))
        self.beta = float(node.attr("beta", 0.75))
        self.bias = float(node.attr("bias", 1.0))

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        if x.ndim < 2:
            raise self.fail("input must have rank >= 2")
        c = x.shape[1]
        lo = (self.size - 1) // 2
        hi = self.size - 1 - lo
        sq = x * x
        self.check_alloc((x.shape[0], c + lo + hi) + x.shape[2:], x.dtype, "padded squares")  # size up to 2**63
        pad = np.zeros((x.shape[0], c + lo + hi) + x.shape[2:], dtype=x.dtype)
        pad[:, lo:lo + c] = sq
        acc = pad[:, 0:c].copy()
        for i in range(1, self.size):
            acc += pad[:, i:i + c]
        t = x.dtype.type
        acc *= t(self.alpha / self.size)
        acc += t(self.bias)
        if self.beta == 0.75:
            den = np.sqrt(acc)
            den *= np.sqrt(den)
        else:
            den = acc ** t(self.beta)
        return (x / den,)
