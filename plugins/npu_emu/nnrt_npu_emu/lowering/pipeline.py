"""The lowering pipeline: analysis -> selection (with the capability check) -> emission."""
from __future__ import annotations

from nnrt_core.ir import Graph
from nnrt_npu_emu.lowering.analysis import Analysis
from nnrt_npu_emu.lowering.emission import Lowered, ProgramEmitter
from nnrt_npu_emu.lowering.selection import select_steps
from nnrt_npu_emu.profiles import ChipProfile

__all__ = ["lower_graph"]


def lower_graph(graph: Graph, profile: ChipProfile, precision: str) -> Lowered:
    """Lower a partition to a device program with planned memory; raises
    :class:`Unsupported` / :class:`CompileError`."""
    an = Analysis(graph, profile, precision)
    selection = select_steps(graph, an)
    return ProgramEmitter(graph, an, selection).emit()
