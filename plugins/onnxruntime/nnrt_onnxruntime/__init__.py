"""ONNX Runtime delegate backend for nnrt (entry point ``onnxruntime`` of group
``nnrt.backends``).  See ``README.md`` in the plugin folder for the design."""
from __future__ import annotations

from nnrt_onnxruntime.version import __version__

__all__ = ["__version__", "OnnxRuntimeBackend"]


def __getattr__(name: str):  # lazy: importing the package must not import onnxruntime
    if name == "OnnxRuntimeBackend":
        from nnrt_onnxruntime.backend import OnnxRuntimeBackend

        return OnnxRuntimeBackend
    raise AttributeError(name)
