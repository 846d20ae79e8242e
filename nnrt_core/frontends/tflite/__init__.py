"""The TFLite frontend: the only part of nnrt that imports ``tflite``.

``schema`` (the checked flatbuffer: tensors, buffers, quantization),
``context`` (the layout-tracking conversion state), ``ops`` (one mapper per
builtin operator, registered by name), ``convert`` (subgraph -> IR) and
``load`` (path or bytes -> IR ``Model``).  See docs/tflite.md.
"""
from __future__ import annotations

from nnrt_core.frontends.tflite.convert import OPSET, unsupported_ops
from nnrt_core.frontends.detect import is_tflite_source
from nnrt_core.frontends.tflite.load import load_tflite, read_flat_model
from nnrt_core.frontends.tflite.ops import available_ops, custom_ops, register_op, unregister_op
from nnrt_core.frontends.tflite.schema import FILE_IDENTIFIER, FlatModel, looks_like_tflite

__all__ = ["FILE_IDENTIFIER", "OPSET", "FlatModel", "available_ops", "custom_ops", "is_tflite_source",
           "load_tflite", "looks_like_tflite", "read_flat_model", "register_op", "unregister_op",
           "unsupported_ops"]
