"""DepthToSpace and SpaceToDepth (DCR and CRD modes), as reshape/transpose."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


class _Block(Kernel):
    def _setup(self, node: NodeInfo) -> None:
        bs = node.attr("blocksize")
        if bs is None or int(bs) < 1:
            raise self.fail("attribute blocksize is required and must be >= 1")
        self.bs = int(bs)
        self.mode = node.attr("mode", "DCR")
        if self.mode not in ("DCR", "CRD"):
            raise self.fail(f"unknown mode {self.mode!r}")


@register
class DepthToSpace(_Block):
    op_type = "DepthToSpace"
    since_version = 1

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        if x.ndim != 4:
            raise self.fail("input must be 4-D")
        n, c, h, w = x.shape
        b = self.bs
        if c % (b * b):
            raise self.fail(f"channels {c} not divisible by blocksize^2 = {b * b}")
        if self.mode == "DCR":
            t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
        else:
            t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
        return (t.reshape(n, c // (b * b), h * b, w * b),)


@register
class SpaceToDepth(_Block):
    op_type = "SpaceToDepth"
    since_version = 1

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        if x.ndim != 4:
            raise self.fail("input must be 4-D")
        n, c, h, w = x.shape
        b = self.bs
        if h % b or w % b:
            raise self.fail(f"spatial dims {h}x{w} not divisible by blocksize {b}")
        t = x.reshape(n, c, h // b, b, w // b, b)
        t = t.transpose(0, 3, 5, 1, 2, 4) if self.mode == "DCR" else t.transpose(0, 1, 3, 5, 2, 4)
        return (t.reshape(n, c * b * b, h // b, w // b),)
