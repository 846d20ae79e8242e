"""The ``priority`` scheduler (MNN / ONNX Runtime semantics) and the
``measured`` one built on it.

``priority``: each node goes to the first backend, in the configured priority
order, whose capability answer claims it; nodes nobody claims go to the backup.

``measured``: the build compiles each engine alone (with the backup for what
it declines) and, with two or more engines, the priority split between them,
times every plan on the session's input shapes and keeps the fastest
(``nnrt_core.compiler.measure``); the split only when it beats every
whole-model plan.
"""
from __future__ import annotations

from nnrt_core.hookspec import hookimpl
from typing import Sequence

from nnrt_core.placement import PlacementContext, PlacementResult, PlanCandidate, Scheduler

__all__ = ["MeasuredScheduler", "PriorityScheduler"]


class PriorityScheduler(Scheduler):
    name = "priority"
    description = "first backend in priority order that supports the node; backup for the rest"

    def _place(self, ctx: PlacementContext) -> PlacementResult:
        out: dict[str, str] = {}
        for node in ctx.graph.nodes:
            pinned = ctx.pins.get(node.name)
            out[node.name] = pinned if pinned is not None else ctx.first_candidate(node).name  # type: ignore[union-attr]  # place() checked
        return PlacementResult(out)


class MeasuredScheduler(PriorityScheduler):
    name = "measured"
    description = ("compiles each engine alone and the priority split, times them on the session's input "
                   "shapes and keeps the fastest (the measurement is stored in the model cache)")

    def candidate_plans(self, engines: Sequence[str]) -> list[PlanCandidate]:
        plans = [PlanCandidate(f"{e} alone", [e], "priority") for e in engines]
        if len(engines) > 1:
            plans.append(PlanCandidate("split: " + " > ".join(engines) + " (priority)", engines, "priority",
                                       split=True))
        return plans


@hookimpl
def nnrt_schedulers():
    return [PriorityScheduler, MeasuredScheduler]
