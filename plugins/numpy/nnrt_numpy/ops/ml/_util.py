"""Shared helpers of the ai.onnx.ml kernels."""
from __future__ import annotations

ML = "ai.onnx.ml"
