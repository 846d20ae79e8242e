"""QLinearSigmoid (com.microsoft): ``quantize(sigmoid(dequantize(X)))``."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, register

from ._qelementwise import dequant, quant
from ._util import MS


@register
class QLinearSigmoid(Kernel):
    op_type = "QLinearSigmoid"
    domain = MS
    since_version = 1

    def __call__(self, x, x_scale, x_zp, y_scale, y_zp=None) -> Sequence[Any]:
        f = dequant(x, x_scale, x_zp, self.fail, "X")
        y = 1.0 / (1.0 + np.exp(-f))
        return (quant(y, y_scale, y_zp, np.asarray(x).dtype, self.fail),)
