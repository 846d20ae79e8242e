"""Model importers and exporters; :mod:`nnrt_core.frontends.onnx` is the only
part of nnrt that knows ONNX protos."""
from __future__ import annotations

from nnrt_core.frontends.onnx import (
    ExternalWeights,
    infer_static_types,
    load_onnx,
    model_digest,
    parse_model_proto,
    refine_static_shapes,
    to_onnx,
    validate_graph,
)

__all__ = ["ExternalWeights", "infer_static_types", "load_onnx", "model_digest", "parse_model_proto",
           "refine_static_shapes", "to_onnx", "validate_graph"]
