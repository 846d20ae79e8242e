"""SequenceConstruct: a sequence holding the input tensors (all of one type)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, register


@register
class SequenceConstruct(Kernel):
    op_type = "SequenceConstruct"
    since_version = 11

    def __call__(self, *inputs: np.ndarray) -> Sequence[Any]:
        if not inputs:
            raise self.fail("SequenceConstruct needs at least one input")
        arrays = [np.asarray(x) for x in inputs]
        if len({a.dtype for a in arrays}) > 1:
            raise self.fail("all inputs must have the same element type")
        return (arrays,)
