"""Range: ``start, start + delta, ...`` up to (excluding) ``limit``, with
``max(ceil((limit - start) / delta), 0)`` elements."""
from __future__ import annotations

import math

import numpy as np

from ...kernel import Kernel, register


@register
class Range(Kernel):
    op_type = "Range"
    since_version = 11

    def __call__(self, start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray]:
        if start.size != 1 or limit.size != 1 or delta.size != 1:
            raise self.fail("start, limit and delta must be scalars")
        s, l, d = (v.reshape(()) for v in (start, limit, delta))
        if d == 0:
            raise self.fail("delta must be non-zero")
        span = (float(l) - float(s)) / float(d)
        if not math.isfinite(span):
            raise self.fail(f"start {s}, limit {l} and delta {d} give no finite number of elements")
        n = max(int(math.ceil(span)), 0)
        self.check_alloc([n], start.dtype)
        return ((s + np.arange(n, dtype=start.dtype) * d).astype(start.dtype, copy=False),)
