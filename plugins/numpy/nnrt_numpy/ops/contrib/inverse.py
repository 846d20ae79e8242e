"""Inverse (com.microsoft): inverse of each square matrix in the batch."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, register

from ._util import MS


@register
class Inverse(Kernel):
    op_type = "Inverse"
    domain = MS
    since_version = 1

    def __call__(self, x) -> Sequence[Any]:
        x = np.asarray(x)
        if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
            raise self.fail(f"input must be a batch of square matrices, got shape {x.shape}")
        comp = np.float64 if x.dtype == np.float64 else np.float32
        try:
            y = np.linalg.inv(x.astype(comp, copy=False))
        except np.linalg.LinAlgError:
            raise self.fail("a matrix in the batch is singular") from None
        return (y.astype(x.dtype, copy=False),)
