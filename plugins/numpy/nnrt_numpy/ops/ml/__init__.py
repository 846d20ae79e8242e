"""Operator kernels: ai.onnx.ml (classical machine-learning operators)."""
from __future__ import annotations

from . import array_feature_extractor, binarizer, label_encoder, tree_ensemble  # noqa: F401
