"""Operator kernels: nn.  Import each op module explicitly (it registers itself)."""
from __future__ import annotations

# from . import <module>  -- one line per op module
from . import activation, attention, averagepool, batchnorm, clip, col2im, conv, conv_transpose, deform_conv, dropout, loss, maxunpool, topk, global_pool, group_norm, instance_norm, layer_norm, lp_norm, lppool, lrn, max_roi_pool, maxpool, mvn, prelu, relu, rms_norm, rotary_embedding, softmax
