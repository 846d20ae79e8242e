"""QLinearConcat (com.microsoft): concatenation of quantized tensors with
their own scales / zero points, requantized to ``Y_scale`` / ``Y_zero_point``.
Inputs: ``Y_scale, Y_zero_point, (X_i, X_i_scale, X_i_zero_point)...``."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._qelementwise import dequant, quant
from ._util import MS


@register
class QLinearConcat(Kernel):
    op_type = "QLinearConcat"
    domain = MS
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        if node.attr("axis") is None:
            raise self.fail("the 'axis' attribute is required")
        self.axis = int(node.attr("axis"))
        if node.num_inputs and (node.num_inputs - 2) % 3:
            raise self.fail("inputs must be Y_scale, Y_zero_point followed by (tensor, scale, zero_point) triples")

    def __call__(self, y_scale, y_zp, *rest) -> Sequence[Any]:
        if not rest or len(rest) % 3:
            raise self.fail("inputs must be Y_scale, Y_zero_point followed by (tensor, scale, zero_point) triples")
        xs = [np.asarray(rest[i]) for i in range(0, len(rest), 3)]
        rank = xs[0].ndim
        if not -rank <= self.axis < rank:
            raise self.fail(f"axis {self.axis} out of range for rank {rank}")
        parts = [dequant(rest[i], rest[i + 1], rest[i + 2], self.fail, f"X{i // 3}") for i in range(0, len(rest), 3)]
        try:
            cat = np.concatenate(parts, axis=self.axis)
        except ValueError as e:
            raise self.fail(f"inputs cannot be concatenated: {e}") from None
        return (quant(cat, y_scale, y_zp, xs[0].dtype, self.fail),)
