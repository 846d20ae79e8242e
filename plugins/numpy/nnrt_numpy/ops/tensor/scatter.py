"""ScatterElements (and the deprecated Scatter) and ScatterND, with the
``reduction`` modes none/add/mul/max/min (ufunc ``.at`` so duplicates accumulate)."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from .gather_elements import fix_indices

_REDUCE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


class _ScatterBase(Kernel):
    def _setup(self, node: NodeInfo) -> None:
        self.axis = int(node.attr("axis", 0))
        self.reduction = node.attr("reduction", "none")
        if self.reduction != "none" and self.reduction not in _REDUCE:
            raise self.fail(f"unknown reduction {self.reduction!r}")


@register
class ScatterElements(_ScatterBase):
    op_type = "ScatterElements"
    since_version = 11

    def __call__(self, data: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> tuple[np.ndarray]:
        r = data.ndim
        if not -r <= self.axis < r:
            raise self.fail(f"axis {self.axis} out of range for rank {r}")
        axis = self.axis % r
        if indices.shape != updates.shape or indices.ndim != r:
            raise self.fail("indices and updates must have the same shape and data's rank")
        idx = fix_indices(self, indices, data.shape[axis])
        grid = list(np.indices(idx.shape, sparse=True))
        grid[axis] = idx
        out = data.copy()
        if self.reduction == "none":
            out[tuple(grid)] = updates
        else:
            _REDUCE[self.reduction].at(out, tuple(grid), updates)
        return (out,)


@register
class Scatter(ScatterElements):
    """Scatter-9 (deprecated alias of ScatterElements without reduction)."""

    op_type = "Scatter"
    since_version = 9


@register
class ScatterND(_ScatterBase):
    op_type = "ScatterND"
    since_version = 11

    def __call__(self, data: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> tuple[np.ndarray]:
        k = indices.shape[-1]
        if k > data.ndim:
            raise self.fail(f"index depth {k} exceeds data rank {data.ndim}")
        if updates.shape != indices.shape[:-1] + data.shape[k:]:
            raise self.fail(f"updates shape {updates.shape} != {indices.shape[:-1] + data.shape[k:]}")
        lim = np.array(data.shape[:k], dtype=np.int64)
        idx = indices.reshape(-1, k).astype(np.int64)
        if idx.size and ((idx < -lim).any() or (idx >= lim).any()):
            raise self.fail("indices out of range")
        idx = np.where(idx < 0, idx + lim, idx)
        upd = updates.reshape((idx.shape[0],) + data.shape[k:])
        out = data.copy()
        key = tuple(idx[:, i] for i in range(k))
        if self.reduction == "none":
            out[key] = upd
        else:
            _REDUCE[self.reduction].at(out, key, upd)
        return (out,)
