"""The plugin's version (a leaf module: the package and the backend both read it)."""
from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
