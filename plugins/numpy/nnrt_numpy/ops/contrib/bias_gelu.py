"""BiasGelu (com.microsoft): exact GELU of ``A + B`` (float32: nnrt_numpy.fast_erf; else scipy's erf)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.fast_erf import gelu_float32
from nnrt_numpy.kernel import Kernel, register

from ._util import MS, gelu_erf


@register
class BiasGelu(Kernel):
    op_type = "BiasGelu"
    domain = MS
    since_version = 1
    uses_scipy = True

    def __call__(self, a, b) -> Sequence[Any]:
        a = np.asarray(a)
        b = np.asarray(b)
        if b.ndim != 1 or (a.ndim and b.shape[0] != a.shape[-1]):
            raise self.fail(f"bias must be 1-D matching the last axis of A {a.shape}, got {b.shape}")
        s = a + b
        if s.dtype == np.float32:  # a fresh sum: GELU in place
            return (gelu_float32(s, out=s),)
        return (gelu_erf(s),)
