"""GroupNormalization: statistics per (sample, group of channels).  Opset 18
takes scale/bias per group, opset 21 per channel (and adds ``stash_type``)."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from ._norm import normalize, stash_dtype


@register
class GroupNormalization18(Kernel):
    op_type = "GroupNormalization"
    since_version = 18
    per_channel = False

    def _setup(self, node: NodeInfo) -> None:
        g = node.attr("num_groups")
        if g is None or int(g) < 1:
            raise self.fail("attribute num_groups is required and must be >= 1")
        self.groups = int(g)
        self.epsilon = float(node.attr("epsilon", 1e-5))
        self.stash_type = int(node.attr("stash_type", 1))

    def __call__(self, x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray]:
        n, c = x.shape[:2]
        g = self.groups
        if c % g:
            raise self.fail(f"channels {c} not divisible by num_groups {g}")
        xg = x.reshape(n, g, -1).astype(stash_dtype(x, self.stash_type), copy=False)
        y, _, _ = normalize(xg, (2,), self.epsilon)
        if self.per_channel:
            y = y.reshape((n, c) + x.shape[2:]).astype(x.dtype, copy=False)
            shape = (1, c) + (1,) * (x.ndim - 2)
        else:
            y = y.astype(x.dtype, copy=False)
            shape = (1, g, 1)
        y = y * scale.reshape(shape) + bias.reshape(shape)
        return (y.reshape(x.shape).astype(x.dtype, copy=False),)


@register
class GroupNormalization21(GroupNormalization18):
    since_version = 21
    per_channel = True
