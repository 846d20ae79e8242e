"""The allocator tuning and heap prefault the NumPy backend uses (they live in
:mod:`nnrt_core.runtime.heap`, shared with the other backends)."""
from __future__ import annotations

from nnrt_core.plugin_api import prefault_heap, tune_allocator

__all__ = ["tune_allocator", "prefault_heap"]
