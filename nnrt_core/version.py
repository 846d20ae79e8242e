"""nnrt's version (a leaf module: stored in session files and cache keys)."""
from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
