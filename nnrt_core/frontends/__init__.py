"""Model importers and exporters (the only part of nnrt that knows ONNX protos)."""
from __future__ import annotations

from nnrt_core.frontends.onnx_export import to_onnx
from nnrt_core.frontends.onnx_import import load_onnx, refine_static_shapes

__all__ = ["load_onnx", "refine_static_shapes", "to_onnx"]
