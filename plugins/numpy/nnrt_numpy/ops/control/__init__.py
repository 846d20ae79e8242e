"""Operator kernels: control flow (sub-graphs run by our own executor)."""
from __future__ import annotations

from . import if_, loop, scan, sequence_map  # noqa: F401
