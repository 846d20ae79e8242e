"""Static-shape refinement as a pass: once the other passes reached a fixed
point (Shape chains folded into constants), re-infer the types they hid."""
from __future__ import annotations

from typing import Callable, ClassVar

from nnrt_core.ir import Graph
from nnrt_core.passes.base import Pass, PassContext, PassResult

__all__ = ["StaticShapeRefinement"]


class StaticShapeRefinement(Pass):
    """Gives node outputs the static types a shape inference finds for them.

    The inference is injected (the ONNX frontend's ``refine_static_shapes``),
    so the pass layer knows no model format.  It runs after the other passes
    reach a fixed point; when it refines a type they run again, a few rounds
    at most (see :class:`~nnrt_core.passes.PassManager`).
    """

    name = "static_shape_refinement"
    level = "basic"
    description = "re-infer static types hidden behind folded Shape chains"
    after_fixed_point: ClassVar[bool] = True
    counts_readers: ClassVar[bool] = False

    def __init__(self, refine: Callable[[Graph], int]) -> None:
        self.refine = refine

    def run(self, graph: Graph, ctx: PassContext | None = None) -> PassResult:
        result = self.result()
        refined = self.refine(graph)
        if refined:
            result.record(f"{refined} value type(s) made static")
        return result
