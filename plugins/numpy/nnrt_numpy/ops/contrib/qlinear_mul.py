"""QLinearMul (com.microsoft): quantized broadcast multiplication,
``C = quantize(dequantize(A) * dequantize(B))``."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, register

from ._qelementwise import binary
from ._util import MS


@register
class QLinearMul(Kernel):
    op_type = "QLinearMul"
    domain = MS
    since_version = 1

    def __call__(self, a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp=None) -> Sequence[Any]:
        return (binary(a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp, np.multiply, self.fail),)
