"""DynamicQuantizeMatMul (com.microsoft): quantize float ``A`` to uint8 on the
fly (DynamicQuantizeLinear rules), multiply with the quantized ``B`` and
rescale: ``Y = (Aq - a_zp) @ (B - b_zp) * a_scale * b_scale + bias``.

Constant ``B`` (the usual case) is converted once at compile time and
multiplied exactly in float32 (:func:`..quant._imatmul.exact_product`)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register


from ..quant._imatmul import col_param, const_weights, dequantized, exact_product, int_matmul
from ._util import MS


def quantize_uint8(a: np.ndarray) -> tuple[np.ndarray, np.float32, float]:
    """DynamicQuantizeLinear of float32 ``a`` as float32 integers ``q - zero_point``,
    the scale, and the zero point."""
    lo = min(0.0, float(a.min())) if a.size else 0.0
    hi = max(0.0, float(a.max())) if a.size else 0.0
    scale = np.float32((np.float32(hi) - np.float32(lo)) / np.float32(255))
    if scale == 0:
        return np.zeros(a.shape, dtype=np.float32), scale, 0.0
    zp = float(np.rint(np.clip(np.float32(0) - np.float32(lo) / scale, 0, 255)))
    q = np.divide(a, scale, dtype=np.float32)
    np.rint(q, out=q)
    # clip(q + zp, 0, 255) - zp as one clip: the same integers (exact: integers
    # of magnitude <= 256 in float32; numpy's one-pass clip ufunc)
    np.clip(q, np.float32(-zp), np.float32(255.0 - zp), out=q)
    return q, scale, zp


@register
class DynamicQuantizeMatMul(Kernel):
    op_type = "DynamicQuantizeMatMul"
    domain = MS
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.weights = const_weights(node.const(1), node.const(3), node.present(3), self.fail)

    def __call__(self, a, b, b_scale, b_zp=None, bias=None) -> Sequence[Any]:
        a = np.asarray(a, dtype=np.float32)
        b = np.asarray(b)
        aq, a_scale, a_zp = quantize_uint8(a)
        if self.weights is not None and a.ndim >= 2 and a.shape[-1] == self.weights.k:
            acc = exact_product(aq, max(a_zp, 255.0 - a_zp), self.weights)
        else:
            bi = b.astype(np.int64)
            if b_zp is not None:
                bi = bi - col_param(b_zp, b, self.fail, "b_zero_point").astype(np.int64)
            acc = int_matmul(aq.astype(np.int64), bi, self.fail)
        scale = a_scale * col_param(np.asarray(b_scale, dtype=np.float32), b, self.fail, "b_scale")
        return (dequantized(acc, scale, bias),)
