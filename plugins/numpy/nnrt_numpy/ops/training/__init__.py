"""Operator kernels: ai.onnx.preview.training optimizers (one update step each)."""
from __future__ import annotations

from . import adagrad, adam, momentum  # noqa: F401
