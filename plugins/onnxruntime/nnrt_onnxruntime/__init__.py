"""ONNX Runtime delegate backend for nnrt (entry point ``onnxruntime`` of group
``nnrt.backends``).  See ``README.md`` in the plugin folder for the design."""
from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "OnnxRuntimeBackend"]


def __getattr__(name: str):  # lazy: importing the package must not import onnxruntime
    if name == "OnnxRuntimeBackend":
        from nnrt_onnxruntime.backend import OnnxRuntimeBackend

        return OnnxRuntimeBackend
    raise AttributeError(name)
