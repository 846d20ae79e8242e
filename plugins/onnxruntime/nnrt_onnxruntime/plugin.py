"""Entry point of the ONNX Runtime backend (group ``nnrt.backends``)."""
from __future__ import annotations

from nnrt_core.plugin_api import hookimpl

__all__ = ["nnrt_backends"]


@hookimpl
def nnrt_backends():
    from nnrt_onnxruntime.backend import OnnxRuntimeBackend

    return [OnnxRuntimeBackend]
