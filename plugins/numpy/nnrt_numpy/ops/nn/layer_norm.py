"""LayerNormalization (opset 17): normalize over axes ``[axis, rank)``, outputs Y,
Mean and InvStdDev (the latter two with the normalized axes kept as 1)."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from ._norm import normalize, normalize_rows, stash_dtype


@register
class LayerNormalization(Kernel):
    op_type = "LayerNormalization"
    since_version = 17

    def _setup(self, node: NodeInfo) -> None:
        self.axis = int(node.attr("axis", -1))
        self.epsilon = float(node.attr("epsilon", 1e-5))
        self.stash_type = int(node.attr("stash_type", 1))
        self.num_outputs = node.num_outputs

    def __call__(self, x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        r = x.ndim
        if not -r <= self.axis < r:
            raise self.fail(f"axis {self.axis} out of range for rank {r}")
        axis = self.axis % r
        ct = stash_dtype(x, self.stash_type)
        if ct == x.dtype:
            try:
                fast = normalize_rows(x, axis, self.epsilon, np.asarray(scale),
                                      None if bias is None else np.asarray(bias))
            except ValueError:  # scale or bias does not broadcast: the general form says so below
                fast = None
            if fast is not None:
                return fast[: self.num_outputs]
        y, mean, inv = normalize(x.astype(ct, copy=False), tuple(range(axis, r)), self.epsilon)
        y = y.astype(x.dtype, copy=False) * scale
        if bias is not None:
            y = y + bias
        outs = (y.astype(x.dtype, copy=False), mean.astype(ct, copy=False), inv.astype(ct, copy=False))
        return outs[: self.num_outputs]
