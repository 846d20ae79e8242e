"""Model importers and exporters; :mod:`nnrt_core.frontends.onnx` is the only
part of nnrt that knows ONNX protos.  The names below are imported on first
use (PEP 562): importing ``nnrt_core.frontends.detect`` or one module of the
ONNX frontend imports neither frontend whole, nor ``onnx``."""
from __future__ import annotations

from typing import TYPE_CHECKING

from nnrt_core.lazy_names import lazy_names

if TYPE_CHECKING:
    from nnrt_core.frontends.onnx import (ExternalWeights, infer_static_types, load_onnx, model_digest,
                                          parse_model_proto, refine_static_shapes, to_onnx, validate_graph)

__all__ = ["ExternalWeights", "infer_static_types", "load_onnx", "model_digest", "parse_model_proto",
           "refine_static_shapes", "to_onnx", "validate_graph"]

__getattr__, __dir__ = lazy_names(__name__, dict.fromkeys(__all__, "nnrt_core.frontends.onnx"))
