"""nnrt's NumPy reference backend (the embedded default)."""
from __future__ import annotations

__version__ = "0.1.0"
