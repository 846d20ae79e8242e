"""Multinomial (opsets 7, 22): ``sample_size`` class indices per batch row drawn
from the distribution whose unnormalized log-probabilities are the input."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ..quant._common import dtype_from_attr
from ._random import make_rng


@register
class Multinomial(Kernel):
    op_type = "Multinomial"
    since_version = 7

    def _setup(self, node: NodeInfo) -> None:
        self.dtype = dtype_from_attr(int(node.attr("dtype", 6)))
        if self.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise self.fail(f"dtype must be int32 or int64, got {self.dtype}")
        self.sample_size = int(node.attr("sample_size", 1))
        if self.sample_size < 1:
            raise self.fail(f"sample_size must be positive, got {self.sample_size}")
        self.rng = make_rng(node)

    def __call__(self, x) -> Sequence[Any]:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2:
            raise self.fail(f"input must be [batch_size, class_size], got {x.shape}")
        logp = x - x.max(axis=1, keepdims=True)
        cdf = np.cumsum(np.exp(logp), axis=1)
        cdf /= cdf[:, -1:]
        u = self.rng.random((x.shape[0], self.sample_size))
        idx = (u[:, :, None] >= cdf[:, None, :]).sum(axis=-1)
        return (np.minimum(idx, x.shape[1] - 1).astype(self.dtype),)
