"""Concat (all versions; ``axis`` defaults to 1 in opset 1 and may be negative from 11)."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from ._util import norm_axis


@register
class Concat(Kernel):
    op_type = "Concat"
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        axis = node.attr("axis")
        if axis is None:
            if node.opset >= 4:
                raise self.fail("attribute axis is required")
            axis = 1
        self.axis = int(axis)

    def __call__(self, *xs: np.ndarray) -> tuple[np.ndarray]:
        if not xs:
            raise self.fail("needs at least one input")
        rank = xs[0].ndim
        axis = norm_axis(self.axis, rank)
        if axis is None:
            raise self.fail(f"axis {self.axis} out of range for rank {rank}")
        if any(x.ndim != rank for x in xs):
            raise self.fail("all inputs must have the same rank")
        ref = xs[0].shape
        for x in xs[1:]:
            if x.shape[:axis] != ref[:axis] or x.shape[axis + 1:] != ref[axis + 1:]:
                raise self.fail(f"shapes {ref} and {x.shape} differ outside axis {axis}")
        return (np.concatenate(xs, axis=axis),)
