"""Momentum (ai.onnx.preview.training, opset 1): one SGD-with-momentum step
per tensor, ``mode`` ``"standard"`` or ``"nesterov"``.

``g = norm_coefficient * X + G``, ``V' = alpha V + beta' g`` with
``beta' = beta`` if ``T > 0`` else 1; standard: ``X' = X - R V'``;
Nesterov: ``X' = X - R (g + alpha V')``.
"""
from __future__ import annotations

from nnrt_numpy.kernel import NodeInfo, register

from ._optim import Optimizer


@register
class Momentum(Optimizer):
    op_type = "Momentum"
    in_groups = ("X", "G", "V")
    out_groups = ("X_new", "V_new")

    def _attrs(self, node: NodeInfo) -> None:
        self.alpha = self._float_attr(node, "alpha", None)
        self.beta = self._float_attr(node, "beta", None)
        self.norm = self._float_attr(node, "norm_coefficient", None)
        mode = node.attr("mode")
        if mode is None:
            raise self.fail("missing required attribute 'mode'")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        if mode not in ("standard", "nesterov"):
            raise self.fail(f"mode must be 'standard' or 'nesterov', got {mode!r}")
        self.nesterov = mode == "nesterov"

    def update(self, r, t, x, g, v):
        dt = x.dtype.type
        g = dt(self.norm) * x + g
        beta = self.beta if t > 0 else 1.0
        v_new = dt(self.alpha) * v + dt(beta) * g
        if self.nesterov:
            return x - dt(r) * (g + dt(self.alpha) * v_new), v_new
        return x - dt(r) * v_new, v_new
