"""The memory plans of a compiled graph: one per input signature while its
shapes are dynamic (the sizes from the ONNX frontend's static shape
inference), planned by :mod:`nnrt_core.runtime.memory_plan`."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from nnrt_core.ir import Graph, TensorType
from nnrt_core.runtime.memory_plan import MemoryPlan, plan_graph

__all__ = ["MemoryPlans", "static_value_sizes"]


def static_value_sizes(graph: Graph, input_shapes: dict[str, tuple[int, ...]]) -> dict[str, int]:
    """Byte sizes of the graph's values once the inputs have ``input_shapes``
    (ONNX shape inference with data propagation, through the ONNX frontend)."""
    from nnrt_core.errors import InputError
    from nnrt_core.frontends import infer_static_types

    inputs = {v.name: v for v in graph.inputs}
    unknown = sorted(set(input_shapes) - set(inputs))
    if unknown:
        raise InputError(f"memory plan: unknown input(s) {unknown}; inputs: {sorted(inputs)}")
    for v in graph.inputs:
        if v.name in input_shapes and isinstance(v.type, TensorType):
            rank = len(v.type.shape) if v.type.shape is not None else 0
            dims = input_shapes[v.name]
            if rank != len(dims):
                raise InputError(f"memory plan: input {v.name!r} has rank {rank}, got shape {dims}")
    sizes: dict[str, int] = {}
    for name, t in infer_static_types(graph, input_shapes).items():
        try:
            itemsize = t.dtype.itemsize
        except TypeError:  # no host storage (UNDEFINED)
            continue
        sizes[name] = int(np.prod(t.shape, dtype=np.int64)) * itemsize
    return sizes


class MemoryPlans:
    """The memory plans of one compiled graph, cached per input shapes, and
    the figures reported for it (``stored`` figures for a graph loaded from a
    session file, which has no nodes to plan)."""

    def __init__(self, graph: Graph, stored: dict[str, Any] | None = None) -> None:
        self.graph = graph
        self.stored = stored
        self._plans: dict[tuple, MemoryPlan] = {}
        self._last: MemoryPlan | None = None

    def plan(self, input_shapes: Mapping[str, Sequence[int]] | None = None) -> MemoryPlan:
        """The plan for ``input_shapes`` (needed while shapes are dynamic)."""
        key = tuple(sorted((k, tuple(int(d) for d in v)) for k, v in (input_shapes or {}).items()))
        if key not in self._plans:
            sizes = static_value_sizes(self.graph, dict(key)) if key else None
            self._plans[key] = self._last = plan_graph(self.graph, sizes)
        return self._plans[key]

    def stats(self) -> dict[str, Any]:
        """``planned_peak_bytes``, ``naive_bytes`` and ``lower_bound_bytes`` of
        the latest plan (``None`` while shapes are dynamic and no plan fixed them)."""
        if self.stored is not None:
            return dict(self.stored)
        plan = self._last
        if plan is None and self.graph.nodes:
            plan = self.plan()
        if plan is None or plan.unplanned:
            return {"planned_peak_bytes": None, "naive_bytes": None, "lower_bound_bytes": None}
        return {k: v for k, v in plan.as_stats().items() if k != "unplanned_values"}
