"""FastGelu (com.microsoft): tanh-approximated GELU of ``X (+ bias)``."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, register

from ._util import MS, gelu_tanh


@register
class FastGelu(Kernel):
    op_type = "FastGelu"
    domain = MS
    since_version = 1

    def __call__(self, x, bias=None) -> Sequence[Any]:
        x = np.asarray(x)
        if bias is not None:
            bias = np.asarray(bias)
            if bias.ndim != 1 or (x.ndim and bias.shape[0] != x.shape[-1]):
                raise self.fail(f"bias must be 1-D matching the last axis of X {x.shape}, got {bias.shape}")
            x = x + bias
        return (gelu_tanh(x),)
