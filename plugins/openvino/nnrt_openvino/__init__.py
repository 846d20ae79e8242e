"""OpenVINO backend for nnrt (entry point ``openvino`` of group
``nnrt.backends``).  See ``docs/openvino.md`` for the design."""
from __future__ import annotations

from nnrt_openvino.version import __version__

__all__ = ["__version__", "OpenVinoBackend"]


def __getattr__(name: str):  # lazy: importing the package must not import openvino
    if name == "OpenVinoBackend":
        from nnrt_openvino.backend import OpenVinoBackend

        return OpenVinoBackend
    raise AttributeError(name)
