"""Adam (ai.onnx.preview.training, opset 1): one Adam step per tensor.

``g = norm_coefficient * X + G``, ``V' = alpha V + (1 - alpha) g``,
``H' = beta H + (1 - beta) g^2``, learning rate bias-corrected when ``T > 0``
(``R * sqrt(1 - beta^T) / (1 - alpha^T)``),
``X' = (1 - norm_coefficient_post) * (X - r * V' / (sqrt(H') + epsilon))``.
"""
from __future__ import annotations

import numpy as np

from nnrt_numpy.kernel import NodeInfo, register

from ._optim import Optimizer


@register
class Adam(Optimizer):
    op_type = "Adam"
    in_groups = ("X", "G", "V", "H")
    out_groups = ("X_new", "V_new", "H_new")

    def _attrs(self, node: NodeInfo) -> None:
        self.alpha = self._float_attr(node, "alpha", 0.9)
        self.beta = self._float_attr(node, "beta", 0.999)
        self.eps = self._float_attr(node, "epsilon", 1e-6)
        self.norm = self._float_attr(node, "norm_coefficient", 0.0)
        self.norm_post = self._float_attr(node, "norm_coefficient_post", 0.0)

    def update(self, r, t, x, g, v, h):
        dt = x.dtype.type
        a, b = self.alpha, self.beta
        g = dt(self.norm) * x + g
        v_new = dt(a) * v + dt(1 - a) * g
        h_new = dt(b) * h + dt(1 - b) * (g * g)
        rate = r * np.sqrt(1 - b ** t) / (1 - a ** t) if t > 0 else r
        x_new = x - dt(rate) * (v_new / (np.sqrt(h_new) + dt(self.eps)))
        return dt(1 - self.norm_post) * x_new, v_new, h_new
