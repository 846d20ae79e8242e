"""BiasAdd (com.microsoft): ``X + bias + skip`` for (N, S, C) tensors."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, register

from ._util import MS


@register
class BiasAdd(Kernel):
    op_type = "BiasAdd"
    domain = MS
    since_version = 1

    def __call__(self, x, bias, skip) -> Sequence[Any]:
        x = np.asarray(x)
        bias = np.asarray(bias)
        skip = np.asarray(skip)
        if x.ndim != 3 or bias.shape != (x.shape[-1],) or skip.shape != x.shape:
            raise self.fail(f"expected X (N,S,C), bias (C,), skip (N,S,C); got {x.shape}, {bias.shape}, {skip.shape}")
        return (x + bias + skip,)
