"""SimplifiedLayerNormalization (ONNX Runtime's RMS norm, registered by ORT in
the default domain at version 1): ``X / sqrt(mean(X^2) + epsilon) * scale``
over axes ``axis..``; second output is the inverse RMS."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._norm import comp_dtype, layer_norm


@register
class SimplifiedLayerNormalization(Kernel):
    op_type = "SimplifiedLayerNormalization"
    domain = ""
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.axis = int(node.attr("axis", -1))
        self.eps = float(node.attr("epsilon", 1e-5))

    def __call__(self, x, scale) -> Sequence[Any]:
        x = np.asarray(x)
        if not -x.ndim <= self.axis < x.ndim:
            raise self.fail(f"axis {self.axis} out of range for rank {x.ndim}")
        axis = self.axis % x.ndim
        scale = np.asarray(scale)
        try:
            np.broadcast_shapes(scale.shape, x.shape[axis:])
        except ValueError:
            raise self.fail(f"scale shape {scale.shape} does not broadcast to {x.shape[axis:]}") from None
        comp = comp_dtype(x.dtype)
        y, _, inv = layer_norm(x.astype(comp), axis, self.eps, True)
        y = y * scale.astype(comp)
        return [y.astype(x.dtype), inv.astype(np.float32)]
