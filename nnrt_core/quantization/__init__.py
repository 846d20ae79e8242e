"""Post-training static int8 quantization (calibration + ONNX QDQ output).

>>> from nnrt_core.quantization import quantize
>>> result = quantize("model.onnx", "calibration.npz", "model_int8.onnx", method="entropy")
>>> print(result.report.summary())

See ``docs/quantization.md``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nnrt_core.errors import QuantizationError

if TYPE_CHECKING:
    from nnrt_core.quantization.api import QuantizationReport, QuantizationResult, quantize
    from nnrt_core.quantization.calibrate import TensorStats, calibrate, choose_range, kl_threshold
    from nnrt_core.quantization.config import ACTIVATION_TYPES, METHODS, QuantizationConfig
    from nnrt_core.quantization.data import CalibrationSet, load_calibration, read_npz
    from nnrt_core.quantization.progress import Progress
    from nnrt_core.quantization.qdq import QParams, QuantPlan, activation_qparams, plan_quantization

#: name -> module, imported on first use (PEP 562): ``nnrt_core.quantization.cli``
#: (the ``nnrt quantize`` flags) does not pull in onnx and the quantizer
_LAZY = {
    **dict.fromkeys(["QuantizationReport", "QuantizationResult", "quantize"], "nnrt_core.quantization.api"),
    **dict.fromkeys(["TensorStats", "calibrate", "choose_range", "kl_threshold"], "nnrt_core.quantization.calibrate"),
    **dict.fromkeys(["ACTIVATION_TYPES", "METHODS", "QuantizationConfig"], "nnrt_core.quantization.config"),
    **dict.fromkeys(["CalibrationSet", "load_calibration", "read_npz"], "nnrt_core.quantization.data"),
    "Progress": "nnrt_core.quantization.progress",
    **dict.fromkeys(["QParams", "QuantPlan", "activation_qparams", "plan_quantization"],
                    "nnrt_core.quantization.qdq"),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nnrt_core.quantization' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
