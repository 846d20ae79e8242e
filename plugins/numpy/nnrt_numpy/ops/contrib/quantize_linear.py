"""QuantizeLinear / DequantizeLinear in the com.microsoft domain (ONNX Runtime's
QDQ contrib ops for 16-bit and 4-bit types): the standard per-tensor / per-axis
semantics with an ``axis`` attribute (no blocking, no saturate attribute)."""
from __future__ import annotations

from nnrt_numpy.kernel import register

from ..quant.dequantize_linear import DequantizeLinear13
from ..quant.quantize_linear import QuantizeLinear13
from ._util import MS


@register
class MsQuantizeLinear(QuantizeLinear13):
    domain = MS
    since_version = 1


@register
class MsDequantizeLinear(DequantizeLinear13):
    domain = MS
    since_version = 1
