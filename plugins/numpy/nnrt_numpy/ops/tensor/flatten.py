"""Flatten to 2-D at ``axis`` (default 1; negative axes from opset 11)."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


@register
class Flatten(Kernel):
    op_type = "Flatten"
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.axis = int(node.attr("axis", 1))

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        r = x.ndim
        axis = self.axis + r if self.axis < 0 else self.axis
        if not 0 <= axis <= r:
            raise self.fail(f"axis {self.axis} out of range for rank {r}")
        return (x.reshape(int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:]))),)
