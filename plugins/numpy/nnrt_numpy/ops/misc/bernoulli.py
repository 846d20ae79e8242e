"""Bernoulli (opsets 15, 22): 1 with probability ``input[i]``, else 0, in the
type given by ``dtype`` (default: the input type)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ..quant._common import dtype_from_attr
from ._random import make_rng


@register
class Bernoulli(Kernel):
    op_type = "Bernoulli"
    since_version = 15

    def _setup(self, node: NodeInfo) -> None:
        code = node.attr("dtype")
        self.dtype = None if code is None else dtype_from_attr(int(code))
        self.rng = make_rng(node)

    def __call__(self, x) -> Sequence[Any]:
        x = np.asarray(x)
        p = x.astype(np.float64)
        if p.size and (np.nanmin(p) < 0 or np.nanmax(p) > 1):
            raise self.fail("probabilities must lie in [0, 1]")
        y = self.rng.random(x.shape) < p
        return (y.astype(self.dtype if self.dtype is not None else x.dtype),)
