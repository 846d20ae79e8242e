"""Slice: attributes ``starts/ends/axes`` before opset 10, inputs (with ``steps``) after.
Indices are clamped like Python slicing (per the ONNX rules for negative steps)."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from ._util import int_list


class _SliceBase(Kernel):
    op_type = "Slice"

    def slice(self, x: np.ndarray, starts, ends, axes, steps) -> np.ndarray:
        r = x.ndim
        if axes is None:
            axes = list(range(len(starts)))
        if steps is None:
            steps = [1] * len(starts)
        if not len(starts) == len(ends) == len(axes) == len(steps):
            raise self.fail("starts, ends, axes and steps must have the same length")
        sl = [slice(None)] * r
        seen = set()
        for s, e, a, st in zip(starts, ends, axes, steps):
            if not -r <= a < r:
                raise self.fail(f"axis {a} out of range for rank {r}")
            a %= r
            if a in seen:
                raise self.fail(f"axis {a} repeated")
            seen.add(a)
            if st == 0:
                raise self.fail("steps must be non-zero")
            n = x.shape[a]
            s = s + n if s < 0 else s
            e = e + n if e < 0 else e
            if st > 0:
                s = min(max(s, 0), n)
                e = min(max(e, 0), n)
            else:
                s = min(max(s, 0), n - 1)
                e = min(max(e, -1), n - 1)
            sl[a] = slice(s, e if e >= 0 else None, st)
        return x[tuple(sl)]


@register
class Slice1(_SliceBase):
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.starts = int_list(node.attr("starts"))
        self.ends = int_list(node.attr("ends"))
        self.axes = int_list(node.attr("axes"))
        if self.starts is None or self.ends is None:
            raise self.fail("attributes starts and ends are required")

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        return (self.slice(x, self.starts, self.ends, self.axes, None),)


@register
class Slice10(_SliceBase):
    since_version = 10

    def __call__(self, x, starts, ends, axes=None, steps=None) -> tuple[np.ndarray]:
        return (self.slice(x, int_list(starts), int_list(ends), int_list(axes), int_list(steps)),)
