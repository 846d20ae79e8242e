"""Adagrad (ai.onnx.preview.training, opset 1): one ADAGRAD step per tensor.

``r' = R / (1 + T * decay_factor)``, ``g = norm_coefficient * X + G``,
``H' = H + g^2``, ``X' = X - r' * g / (sqrt(H') + epsilon)``.
"""
from __future__ import annotations

import numpy as np

from nnrt_numpy.kernel import NodeInfo, register

from ._optim import Optimizer


@register
class Adagrad(Optimizer):
    op_type = "Adagrad"
    in_groups = ("X", "G", "H")
    out_groups = ("X_new", "H_new")

    def _attrs(self, node: NodeInfo) -> None:
        self.decay = self._float_attr(node, "decay_factor", 0.0)
        self.eps = self._float_attr(node, "epsilon", 1e-6)
        self.norm = self._float_attr(node, "norm_coefficient", 0.0)

    def update(self, r, t, x, g, h):
        dt = x.dtype.type
        rate = dt(r / (1 + t * self.decay))
        g = dt(self.norm) * x + g
        h_new = h + g * g
        x_new = x - rate * g / (np.sqrt(h_new) + dt(self.eps))
        return x_new, h_new
