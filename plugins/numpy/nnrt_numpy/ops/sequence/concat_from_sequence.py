"""ConcatFromSequence: concatenate (or with ``new_axis=1`` stack) the tensors of a sequence."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._util import as_sequence


@register
class ConcatFromSequence(Kernel):
    op_type = "ConcatFromSequence"
    since_version = 11

    def _setup(self, node: NodeInfo) -> None:
        if node.attr("axis") is None:
            raise self.fail("the 'axis' attribute is required")
        self.axis = int(node.attr("axis"))
        self.new_axis = bool(node.attr("new_axis", 0))

    def __call__(self, seq) -> Sequence[Any]:
        seq = [np.asarray(a) for a in as_sequence(seq, self.fail)]
        if not seq:
            raise self.fail("cannot concatenate an empty sequence")
        rank = seq[0].ndim + (1 if self.new_axis else 0)
        if not -rank <= self.axis < rank:
            raise self.fail(f"axis {self.axis} out of range for rank {rank}")
        try:
            out = np.stack(seq, axis=self.axis) if self.new_axis else np.concatenate(seq, axis=self.axis)
        except ValueError as e:
            raise self.fail(f"tensors cannot be joined: {e}") from None
        return (out,)
