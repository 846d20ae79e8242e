"""The version of the ``npu_emu`` backend plugin."""
from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.3.0"
