"""Operator kernels: ai.onnx.preview (operators still in preview in the ONNX standard)."""
from __future__ import annotations

from . import flex_attention  # noqa: F401
