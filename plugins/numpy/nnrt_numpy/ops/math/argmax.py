"""ArgMax and ArgMin: int64 indices along ``axis``; ``select_last_index`` (opset 12)
returns the last occurrence of the extreme value."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


class _Arg(Kernel):
    fn = staticmethod(np.argmax)

    def _setup(self, node: NodeInfo) -> None:
        self.axis = int(node.attr("axis", 0))
        self.keepdims = bool(node.attr("keepdims", 1))
        self.last = bool(node.attr("select_last_index", 0))

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        r = x.ndim
        if not -r <= self.axis < r:
            raise self.fail(f"axis {self.axis} out of range for rank {r}")
        axis = self.axis % r
        if x.shape[axis] == 0:
            raise self.fail("cannot take the arg-extreme of an empty axis")
        if self.last:
            n = x.shape[axis]
            y = n - 1 - type(self).fn(np.flip(x, axis), axis=axis)
        else:
            y = type(self).fn(x, axis=axis)
        if self.keepdims:
            y = np.expand_dims(y, axis)
        return (y.astype(np.int64),)


@register
class ArgMax(_Arg):
    op_type = "ArgMax"
    fn = staticmethod(np.argmax)


@register
class ArgMin(_Arg):
    op_type = "ArgMin"
    fn = staticmethod(np.argmin)
