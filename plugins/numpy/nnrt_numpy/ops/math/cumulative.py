"""CumSum and CumProd along a runtime ``axis`` input, with ``exclusive`` and ``reverse``."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


class _Cumulative(Kernel):
    fn = staticmethod(np.cumsum)
    identity = 0

    def _setup(self, node: NodeInfo) -> None:
        self.exclusive = bool(node.attr("exclusive", 0))
        self.reverse = bool(node.attr("reverse", 0))

    def __call__(self, x: np.ndarray, axis: np.ndarray) -> tuple[np.ndarray]:
        if axis.size != 1:
            raise self.fail("axis must be a scalar")
        a = int(axis.reshape(()))
        if not -x.ndim <= a < x.ndim:
            raise self.fail(f"axis {a} out of range for rank {x.ndim}")
        a %= x.ndim
        if self.reverse:
            x = np.flip(x, a)
        y = type(self).fn(x, axis=a, dtype=x.dtype)
        if self.exclusive:
            shifted = np.full_like(y, self.identity)
            src = [slice(None)] * x.ndim
            dst = [slice(None)] * x.ndim
            src[a] = slice(0, -1)
            dst[a] = slice(1, None)
            shifted[tuple(dst)] = y[tuple(src)]
            y = shifted
        if self.reverse:
            y = np.flip(y, a)
        return (np.ascontiguousarray(y),)


@register
class CumSum(_Cumulative):
    op_type = "CumSum"
    since_version = 11


@register
class CumProd(_Cumulative):
    op_type = "CumProd"
    since_version = 26
    fn = staticmethod(np.cumprod)
    identity = 1
