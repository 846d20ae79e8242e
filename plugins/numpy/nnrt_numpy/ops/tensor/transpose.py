"""Transpose: ``perm`` defaults to reversing the axes.  Returns a view."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


@register
class Transpose(Kernel):
    op_type = "Transpose"
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        perm = node.attr("perm")
        self.perm = None if perm is None else [int(p) for p in perm]

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        if self.perm is None:
            return (x.transpose(),)
        if sorted(self.perm) != list(range(x.ndim)):
            raise self.fail(f"perm {self.perm} is not a permutation of the {x.ndim} axes")
        return (x.transpose(self.perm),)
