"""Operator kernels: nn.  Import each op module explicitly (it registers itself)."""
from __future__ import annotations

# from . import <module>  -- one line per op module
from . import activation  # noqa: F401
from . import attention  # noqa: F401
from . import averagepool  # noqa: F401
from . import batchnorm  # noqa: F401
from . import causal_conv_with_state  # noqa: F401
from . import clip  # noqa: F401
from . import col2im  # noqa: F401
from . import conv  # noqa: F401
from . import conv_transpose  # noqa: F401
from . import deform_conv  # noqa: F401
from . import dropout  # noqa: F401
from . import global_pool  # noqa: F401
from . import group_norm  # noqa: F401
from . import instance_norm  # noqa: F401
from . import layer_norm  # noqa: F401
from . import linear_attention  # noqa: F401
from . import loss  # noqa: F401
from . import lp_norm  # noqa: F401
from . import lppool  # noqa: F401
from . import lrn  # noqa: F401
from . import max_roi_pool  # noqa: F401
from . import maxpool  # noqa: F401
from . import maxunpool  # noqa: F401
from . import mvn  # noqa: F401
from . import prelu  # noqa: F401
from . import relu  # noqa: F401
from . import rms_norm  # noqa: F401
from . import rotary_embedding  # noqa: F401
from . import softmax  # noqa: F401
from . import swiglu  # noqa: F401
from . import topk  # noqa: F401
