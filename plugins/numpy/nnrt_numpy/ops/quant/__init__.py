"""Operator kernels: quant.  Import each op module explicitly (it registers itself)."""
from __future__ import annotations

from . import conv_integer  # noqa: F401
from . import dequantize_linear  # noqa: F401
from . import dynamic_quantize_linear  # noqa: F401
from . import matmul_integer  # noqa: F401
from . import qlinear_conv  # noqa: F401
from . import qlinear_matmul  # noqa: F401
from . import quantize_linear  # noqa: F401
