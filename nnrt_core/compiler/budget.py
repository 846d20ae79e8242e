"""The session's memory budget at build time: the graph passes (constant
folding included) run under it, and every node output whose size is known
statically is checked against it (see ``ScheduleConfig.max_tensor_bytes``)."""
from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Iterator

from nnrt_core.errors import MemoryBudgetError
from nnrt_core.ir import Graph
from nnrt_core.control import DEFAULT_MAX_TENSOR_BYTES, RunControl, enter, leave

__all__ = ["build_budget", "check_static_sizes"]


@contextmanager
def build_budget(max_tensor_bytes: int | None) -> Iterator[None]:
    """Kernels evaluated meanwhile on this thread (constant folding) see the session's budget."""
    prev = enter(RunControl.budget_only(max_tensor_bytes))
    try:
        yield
    finally:
        leave(prev)


def check_static_sizes(graph: Graph, max_tensor_bytes: int | None) -> None:
    """``MemoryBudgetError`` naming the first node whose statically known
    output is larger than the budget (``None``: ``NNRT_MAX_TENSOR_BYTES``)."""
    limit = DEFAULT_MAX_TENSOR_BYTES if max_tensor_bytes is None else max_tensor_bytes
    for node in graph.nodes:
        for v in node.outputs:
            shape, dtype = (v.shape, v.dtype) if v is not None else (None, None)
            if shape is None or dtype is None or not all(isinstance(d, int) for d in shape):
                continue
            try:
                size = math.prod(shape) * dtype.itemsize
            except TypeError:  # no numpy storage for this element type
                continue
            if size > limit:
                raise MemoryBudgetError(
                    f"node {node.name!r} ({node.op_type}): output {v.name!r} of shape {list(shape)} "
                    f"({dtype.numpy.name}) needs {size} bytes, over the memory budget of {limit} bytes "
                    f"(ScheduleConfig.max_tensor_bytes / NNRT_MAX_TENSOR_BYTES); refused at build")
