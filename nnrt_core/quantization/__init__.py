"""Post-training static int8 quantization (calibration + ONNX QDQ output).

>>> from nnrt_core.quantization import quantize
>>> result = quantize("model.onnx", "calibration.npz", "model_int8.onnx", method="entropy")
>>> print(result.report.summary())

See ``docs/quantization.md``.
"""
from __future__ import annotations

from nnrt_core.errors import QuantizationError
from nnrt_core.quantization.api import QuantizationReport, QuantizationResult, quantize
from nnrt_core.quantization.calibrate import TensorStats, calibrate, choose_range, kl_threshold
from nnrt_core.quantization.config import ACTIVATION_TYPES, METHODS, QuantizationConfig
from nnrt_core.quantization.data import CalibrationSet, load_calibration, read_npz
from nnrt_core.quantization.progress import Progress
from nnrt_core.quantization.qdq import QParams, QuantPlan, activation_qparams, plan_quantization

__all__ = [
    "ACTIVATION_TYPES",
    "CalibrationSet",
    "METHODS",
    "Progress",
    "QParams",
    "QuantPlan",
    "QuantizationConfig",
    "QuantizationError",
    "QuantizationReport",
    "QuantizationResult",
    "TensorStats",
    "activation_qparams",
    "calibrate",
    "choose_range",
    "kl_threshold",
    "load_calibration",
    "plan_quantization",
    "quantize",
    "read_npz",
]
