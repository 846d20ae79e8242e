"""Clip: opsets 1-10 take ``min``/``max`` attributes, 11+ optional inputs."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


def _clip(x: np.ndarray, lo, hi) -> np.ndarray:
    if lo is not None and hi is not None and x.dtype.kind in "fiu" and x.dtype.itemsize >= 4:
        # one pass with numpy's SIMD clip loop (maximum / minimum with a scalar are ~2.6x slower each);
        # the same values: hi wins where lo > hi, NaN stays NaN
        return np.clip(x, lo, hi)
    if lo is not None:
        x = np.maximum(x, lo)
    if hi is not None:
        x = np.minimum(x, hi)
    return x


@register
class Clip1(Kernel):
    op_type = "Clip"
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.lo = node.attr("min")
        self.hi = node.attr("max")

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        t = x.dtype.type
        y = _clip(x, None if self.lo is None else t(self.lo), None if self.hi is None else t(self.hi))
        return (y.copy() if y is x else y,)


@register
class Clip11(Kernel):
    op_type = "Clip"
    since_version = 11

    def __call__(self, x: np.ndarray, lo: np.ndarray | None = None, hi: np.ndarray | None = None) -> tuple[np.ndarray]:
        for v, name in ((lo, "min"), (hi, "max")):
            if v is not None and v.size != 1:
                raise self.fail(f"{name} must be a scalar")
        y = _clip(x, None if lo is None else lo.reshape(()).astype(x.dtype),
                  None if hi is None else hi.reshape(()).astype(x.dtype))
        return (y.astype(x.dtype, copy=False),)
