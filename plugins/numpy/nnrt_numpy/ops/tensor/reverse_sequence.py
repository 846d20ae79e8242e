"""ReverseSequence: reverse the first ``sequence_lens[b]`` steps of each batch entry."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


@register
class ReverseSequence(Kernel):
    op_type = "ReverseSequence"
    since_version = 10

    def _setup(self, node: NodeInfo) -> None:
        self.batch_axis = int(node.attr("batch_axis", 1))
        self.time_axis = int(node.attr("time_axis", 0))
        if {self.batch_axis, self.time_axis} != {0, 1}:
            raise self.fail("batch_axis and time_axis must be 0 and 1 (in some order)")

    def __call__(self, x: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray]:
        xt = np.moveaxis(x, (self.batch_axis, self.time_axis), (0, 1))  # (B, T, ...)
        b, t = xt.shape[:2]
        if lens.shape != (b,):
            raise self.fail(f"sequence_lens must have shape ({b},)")
        lens = lens.astype(np.int64)
        if (lens < 0).any() or (lens > t).any():
            raise self.fail(f"sequence_lens must be within [0, {t}]")
        steps = np.arange(t)[None, :]
        src = np.where(steps < lens[:, None], lens[:, None] - 1 - steps, steps)
        y = np.take_along_axis(xt, src.reshape(src.shape + (1,) * (xt.ndim - 2)), axis=1)
        return (np.moveaxis(y, (0, 1), (self.batch_axis, self.time_axis)).copy(),)
