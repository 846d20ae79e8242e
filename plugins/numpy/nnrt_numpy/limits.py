"""Run-time limits of the NumPy kernels: the run's stop checks (deadline,
cancellation) and the memory budget of computed tensors, checked before numpy
allocates (see :mod:`nnrt_core.control`)."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from nnrt_core.errors import MemoryBudgetError, RunStoppedError
from nnrt_core.plugin_api import RunControl, current_control, tensor_limit

__all__ = ["watched_control", "check_stop", "check_alloc", "nbytes_of", "stopped_within", "may_exceed"]


def watched_control() -> RunControl | None:
    """The current run's control when it can stop (deadline or cancellable), else ``None``."""
    c = current_control()
    return c if c is not None and c.watched else None


def check_stop(watch: RunControl | None, where: str) -> None:
    """Raise the run's stop error (naming ``where``) once it is cancelled or late."""
    if watch is not None and watch.stopped():
        raise watch.error(where)


def stopped_within(e: RunStoppedError, where: str) -> RunStoppedError:
    """``e`` (a stop inside a sub-graph) with the enclosing place added to its message."""
    return type(e)(f"{e}, {where}")


def nbytes_of(shape: Sequence[Any], dtype: Any) -> int:
    """Bytes of a tensor of ``shape`` / ``dtype`` (Python ints: no overflow)."""
    return math.prod(int(d) for d in shape) * np.dtype(dtype).itemsize


def may_exceed(a: np.ndarray, b: np.ndarray) -> bool:
    """Cheap pre-test for ops whose output is at most ``a.size * b.size``
    elements (broadcasting, MatMul): True when that bound is over the budget."""
    return a.size * b.size * max(a.dtype.itemsize, b.dtype.itemsize) > tensor_limit()


def check_alloc(node: Any, shape: Sequence[Any], dtype: Any, what: str = "output") -> None:
    """Refuse a tensor of ``shape``/``dtype`` that ``node`` (a ``NodeInfo``)
    would compute when it is over the run's memory budget or has a negative size."""
    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        raise MemoryBudgetError(f"node {node.name!r} ({node.op_type}): {what} shape {dims} has a negative "
                                f"dimension")
    size = nbytes_of(dims, dtype)
    limit = tensor_limit()
    if size > limit:
        raise MemoryBudgetError(f"node {node.name!r} ({node.op_type}): {what} of shape {dims} "
                                f"({np.dtype(dtype)}) needs {size} bytes, over the memory budget of {limit} "
                                f"bytes (ScheduleConfig.max_tensor_bytes / NNRT_MAX_TENSOR_BYTES); refused")
