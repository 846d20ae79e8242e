"""The ``priority`` scheduler (MNN / ONNX Runtime semantics).

Each node goes to the first backend, in the configured priority order, whose
capability answer claims it; nodes nobody claims go to the backup.
"""
from __future__ import annotations

from nnrt_core.plugin_api import hookimpl
from nnrt_core.plugin_api import PlacementContext, PlacementResult, Scheduler

__all__ = ["PriorityScheduler"]


class PriorityScheduler(Scheduler):
    name = "priority"
    description = "first backend in priority order that supports the node; backup for the rest"

    def _place(self, ctx: PlacementContext) -> PlacementResult:
        out: dict[str, str] = {}
        for node in ctx.graph.nodes:
            pinned = ctx.pins.get(node.name)
            out[node.name] = pinned if pinned is not None else ctx.first_candidate(node).name  # type: ignore[union-attr]  # place() checked
        return PlacementResult(out)


@hookimpl
def nnrt_schedulers():
    return [PriorityScheduler]
