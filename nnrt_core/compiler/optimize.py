"""Stage 2: graph passes of the configured optimization level (static-shape
refinement included, as a pass) before placement."""
from __future__ import annotations


from typing import Mapping

from nnrt_core.backend.base import Backend, CompileOptions
from nnrt_core.config import ScheduleConfig
from nnrt_core.ir import Graph, TensorType
from nnrt_core.logs import get_logger
from nnrt_core.passes import (BackendSupport, PassContext, PassManager, PassReport, StaticShapeRefinement,
                              default_passes)

__all__ = ["optimize"]

log = get_logger("nnrt.session")


def optimize(graph: Graph, config: ScheduleConfig, candidates: list[Backend],
             evaluator: Backend | None, options: Mapping[str, CompileOptions]) -> PassReport:
    """Run the passes of ``config.optimization_level`` over ``graph`` in place
    (see docs/passes.md); fusions are checked with the candidates' ``options``
    (the selection's).  With static inputs, types hidden behind folded
    Shape chains are re-inferred (``StaticShapeRefinement``)."""
    ctx = PassContext(evaluator=evaluator, supports=BackendSupport(candidates, options.__getitem__),
                      protected=frozenset(config.pins))
    passes = default_passes(config.optimization_level)
    static_inputs = config.input_shapes or all(isinstance(v.type, TensorType) and v.type.is_static
                                               for v in graph.inputs)
    if passes and static_inputs:
        from nnrt_core.frontends import refine_static_shapes
        passes.append(StaticShapeRefinement(refine_static_shapes))
    report = PassManager(config.optimization_level, passes).run(graph, ctx)
    if report.nodes_after != report.nodes_before:
        log.info("%s", report.summary())
    return report
