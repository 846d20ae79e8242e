"""Operator kernels: contrib (com.microsoft and ONNX Runtime extensions).  Import each op module explicitly (it registers itself)."""
from __future__ import annotations

from . import attention  # noqa: F401
from . import bias_add  # noqa: F401
from . import bias_gelu  # noqa: F401
from . import dynamic_quantize_matmul  # noqa: F401
from . import fast_gelu  # noqa: F401
from . import fused_conv  # noqa: F401
from . import fused_gemm  # noqa: F401
from . import fused_matmul  # noqa: F401
from . import gelu  # noqa: F401
from . import gemm_fast_gelu  # noqa: F401
from . import inverse  # noqa: F401
from . import matmul_integer_to_float  # noqa: F401
from . import matmul_nbits  # noqa: F401
from . import multi_head_attention  # noqa: F401
from . import qgemm  # noqa: F401
from . import qlinear_add  # noqa: F401
from . import qlinear_average_pool  # noqa: F401
from . import qlinear_concat  # noqa: F401
from . import qlinear_global_average_pool  # noqa: F401
from . import qlinear_leaky_relu  # noqa: F401
from . import qlinear_mul  # noqa: F401
from . import qlinear_sigmoid  # noqa: F401
from . import quantize_linear  # noqa: F401
from . import quick_gelu  # noqa: F401
from . import rotary_embedding  # noqa: F401
from . import simplified_layer_normalization  # noqa: F401
from . import skip_layer_normalization  # noqa: F401
