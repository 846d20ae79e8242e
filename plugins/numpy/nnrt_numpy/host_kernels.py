"""Host kernels of the NumPy backend that other plugins build on (public API).

The NPU emulator runs its depthwise convolutions and pools on these kernels,
so that both backends sum the same taps in the same order, and checks its
windows with the same output-size and window-fit rules.  The kernels live
in the op packages' private modules (``ops/nn/_depthwise.py``,
``ops/nn/_spatial.py``); this module is the one place another plugin imports
them from, so those modules can change shape behind it.
"""
from __future__ import annotations

from nnrt_numpy.ops.nn._depthwise import DepthwisePlan
from nnrt_numpy.ops.nn._spatial import pooled_reduce, resolve_pads, window_misfit

__all__ = ["DepthwisePlan", "pooled_reduce", "resolve_pads", "window_misfit"]
