"""GemmFastGelu (com.microsoft): ``FastGelu(X @ W + bias)`` (tanh-approximated GELU)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, register

from ._util import MS, gelu_tanh


@register
class GemmFastGelu(Kernel):
    op_type = "GemmFastGelu"
    domain = MS
    since_version = 1

    def __call__(self, x, w, bias=None) -> Sequence[Any]:
        x = np.asarray(x)
        w = np.asarray(w)
        if w.ndim != 2 or x.shape[-1] != w.shape[0]:
            raise self.fail(f"X (..., K) and W (K, N) expected, got {x.shape}, {w.shape}")
        y = x @ w
        if bias is not None:
            bias = np.asarray(bias)
            if bias.shape != (w.shape[1],):
                raise self.fail(f"bias must have shape ({w.shape[1]},), got {bias.shape}")
            y = y + bias
        return (gelu_tanh(y),)
