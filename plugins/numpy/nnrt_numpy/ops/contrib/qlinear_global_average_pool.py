"""QLinearGlobalAveragePool (com.microsoft): mean over the spatial axes of a
quantized tensor (NCHW, or NHWC with ``channels_last``), requantized."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._qelementwise import dequant, quant
from ._util import MS


@register
class QLinearGlobalAveragePool(Kernel):
    op_type = "QLinearGlobalAveragePool"
    domain = MS
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.channels_last = bool(node.attr("channels_last", 0))

    def __call__(self, x, x_scale, x_zp, y_scale, y_zp) -> Sequence[Any]:
        x = np.asarray(x)
        if x.ndim < 3:
            raise self.fail(f"input must have rank >= 3, got shape {x.shape}")
        f = dequant(x, x_scale, x_zp, self.fail, "X")
        axes = tuple(range(1, x.ndim - 1)) if self.channels_last else tuple(range(2, x.ndim))
        m = f.astype(np.float64).mean(axis=axes, keepdims=True).astype(np.float32)
        return (quant(m, y_scale, y_zp, x.dtype, self.fail),)
