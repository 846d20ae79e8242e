"""Shape (``start``/``end`` slicing from opset 15) and Size."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


@register
class Shape(Kernel):
    op_type = "Shape"
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.start = int(node.attr("start", 0))
        end = node.attr("end")
        self.end = None if end is None else int(end)

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        r = x.ndim
        start = min(max(self.start + r if self.start < 0 else self.start, 0), r)
        end = r if self.end is None else self.end
        end = min(max(end + r if end < 0 else end, 0), r)
        return (np.array(x.shape[start:end], dtype=np.int64),)


@register
class Size(Kernel):
    op_type = "Size"
    since_version = 1

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        return (np.array(x.size, dtype=np.int64),)
