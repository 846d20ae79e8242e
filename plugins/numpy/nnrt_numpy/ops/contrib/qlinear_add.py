"""QLinearAdd (com.microsoft): quantized broadcast addition,
``C = quantize(dequantize(A) + dequantize(B))``."""
from __future__ import annotations

from typing import Any, Sequence

from nnrt_numpy.kernel import Kernel, register

from ._qelementwise import dequant, quant
from ._util import MS


@register
class QLinearAdd(Kernel):
    op_type = "QLinearAdd"
    domain = MS
    since_version = 1

    def __call__(self, a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp=None) -> Sequence[Any]:
        fa = dequant(a, a_scale, a_zp, self.fail, "A")
        fb = dequant(b, b_scale, b_zp, self.fail, "B")
        if a.dtype != b.dtype:
            raise self.fail("A and B must have the same type")
        try:
            s = fa + fb
        except ValueError:
            raise self.fail(f"shapes {a.shape} and {b.shape} do not broadcast") from None
        return (quant(s, c_scale, c_zp, a.dtype, self.fail, "C"),)
