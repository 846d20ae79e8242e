"""Gelu (com.microsoft): exact GELU ``0.5 x (1 + erf(x / sqrt 2))`` (uses scipy's erf)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, register

from ._util import MS, gelu_erf


@register
class Gelu(Kernel):
    op_type = "Gelu"
    domain = MS
    since_version = 1
    uses_scipy = True

    def __call__(self, x) -> Sequence[Any]:
        return (gelu_erf(np.asarray(x)),)
