"""Lowering of a partition to a device :class:`Program`, in stages:
:mod:`.analysis` (graph facts), :mod:`.capability` (what the chip runs),
:mod:`.selection` (device steps, int8 groups) and :mod:`.emission`
(instructions, weights, planned memory); :func:`lower_graph` runs them."""
from __future__ import annotations

from nnrt_npu_emu.lowering.analysis import Analysis, float_precision
from nnrt_npu_emu.lowering.capability import why_unsupported
from nnrt_npu_emu.lowering.emission import Lowered
from nnrt_npu_emu.lowering.pipeline import lower_graph

__all__ = ["Analysis", "why_unsupported", "lower_graph", "float_precision", "Lowered"]
