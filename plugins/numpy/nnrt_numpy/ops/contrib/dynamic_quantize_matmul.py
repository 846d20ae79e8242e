"""DynamicQuantizeMatMul (com.microsoft): quantize float ``A`` to uint8 on the
fly (DynamicQuantizeLinear rules), multiply with the quantized ``B`` and
rescale: ``Y = (Aq - a_zp) @ (B - b_zp) * a_scale * b_scale + bias``."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, register

from ..quant._imatmul import col_param, int_matmul
from ._util import MS


@register
class DynamicQuantizeMatMul(Kernel):
    op_type = "DynamicQuantizeMatMul"
    domain = MS
    since_version = 1

    def __call__(self, a, b, b_scale, b_zp=None, bias=None) -> Sequence[Any]:
        a = np.asarray(a, dtype=np.float32)
        b = np.asarray(b)
        lo = min(0.0, float(a.min())) if a.size else 0.0
        hi = max(0.0, float(a.max())) if a.size else 0.0
        a_scale = np.float32((np.float32(hi) - np.float32(lo)) / np.float32(255))
        if a_scale == 0:
            aq = np.zeros(a.shape, dtype=np.int64)
            a_zp = 0
        else:
            a_zp = int(np.rint(np.clip(np.float32(0) - np.float32(lo) / a_scale, 0, 255)))
            aq = np.clip(np.rint(a / a_scale) + a_zp, 0, 255).astype(np.int64)
        bi = b.astype(np.int64)
        if b_zp is not None:
            bi = bi - col_param(b_zp, b, self.fail, "b_zero_point").astype(np.int64)
        acc = int_matmul(aq - a_zp, bi, self.fail)
        scale = a_scale * col_param(np.asarray(b_scale, dtype=np.float32), b, self.fail, "b_scale")
        y = acc.astype(np.float32) * scale
        if bias is not None:
            y = y + np.asarray(bias, dtype=np.float32)
        return (y.astype(np.float32),)
