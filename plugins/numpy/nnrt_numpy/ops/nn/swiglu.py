"""SwiGLU (opset 28): ``A * sigmoid(alpha * A) * B`` (same-shape inputs)."""
from __future__ import annotations

import numpy as np
from nnrt_numpy import special

from ...kernel import Kernel, NodeInfo, register


@register
class SwiGLU(Kernel):
    op_type = "SwiGLU"
    since_version = 28
    uses_scipy = True

    def _setup(self, node: NodeInfo) -> None:
        self.alpha = float(node.attr("alpha", 1.0))

    def __call__(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
        if a.shape != b.shape:
            raise self.fail(f"A {a.shape} and B {b.shape} must have the same shape")
        t = a.dtype.type
        return ((a * special.expit(a * t(self.alpha)).astype(a.dtype, copy=False) * b).astype(a.dtype, copy=False),)
