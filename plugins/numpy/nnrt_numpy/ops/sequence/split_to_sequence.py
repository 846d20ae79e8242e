"""SplitToSequence: split a tensor along ``axis`` into a sequence.

Without ``split``: pieces of size 1 (squeezed when ``keepdims=0``); a scalar
``split``: equal chunks of that size (the last may be smaller); a 1-D
``split``: explicit sizes that must sum to the axis length."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register


@register
class SplitToSequence(Kernel):
    op_type = "SplitToSequence"
    since_version = 11

    def _setup(self, node: NodeInfo) -> None:
        self.axis = int(node.attr("axis", 0))
        self.keepdims = bool(node.attr("keepdims", 1))

    def __call__(self, x, split=None) -> Sequence[Any]:
        x = np.asarray(x)
        if not -x.ndim <= self.axis < x.ndim:
            raise self.fail(f"axis {self.axis} out of range for rank {x.ndim}")
        axis = self.axis % x.ndim
        n = x.shape[axis]
        if split is None:
            pieces = np.split(x, n, axis=axis) if n else []
            if not self.keepdims:
                pieces = [np.squeeze(p, axis=axis) for p in pieces]
            return (pieces,)
        split = np.asarray(split)
        if split.dtype.kind not in "iu":
            raise self.fail(f"split must be integer, got {split.dtype}")
        if split.ndim == 0:
            size = int(split)
            if size <= 0:
                raise self.fail(f"split size must be positive, got {size}")
            sizes = [size] * (n // size) + ([n % size] if n % size else [])
        elif split.ndim == 1:
            sizes = [int(s) for s in split]
            if any(s < 0 for s in sizes) or sum(sizes) != n:
                raise self.fail(f"split sizes {sizes} must be non-negative and sum to {n}")
        else:
            raise self.fail(f"split must be a scalar or 1-D, got shape {split.shape}")
        bounds = np.cumsum(sizes)[:-1]
        return (list(np.split(x, bounds, axis=axis)),)
