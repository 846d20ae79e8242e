"""QLinearLeakyRelu (com.microsoft): ``quantize(leaky_relu(dequantize(X), alpha))``."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._qelementwise import dequant, quant
from ._util import MS


@register
class QLinearLeakyRelu(Kernel):
    op_type = "QLinearLeakyRelu"
    domain = MS
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.alpha = np.float32(node.attr("alpha", 0.01))

    def __call__(self, x, x_scale, x_zp, y_scale, y_zp=None) -> Sequence[Any]:
        f = dequant(x, x_scale, x_zp, self.fail, "X")
        y = np.where(f >= 0, f, f * self.alpha)
        return (quant(y, y_scale, y_zp, np.asarray(x).dtype, self.fail),)
