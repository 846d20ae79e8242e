"""Pow: the result has the base's type (the exponent may differ from opset 12)."""
from __future__ import annotations

import numpy as np

from ...kernel import register
from ._binary import make_binary


def power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        return np.power(a, b.astype(a.dtype, copy=False) if b.dtype.kind == a.dtype.kind else b).astype(a.dtype)
    if a.dtype.kind == "f" and b.dtype != a.dtype:
        return np.power(a, b.astype(a.dtype)) if b.dtype.kind == "f" else np.power(a, b).astype(a.dtype)
    return np.power(a, b).astype(a.dtype, copy=False)


for _cls in make_binary("Pow", power, (1, 7, 12, 13, 15)):
    register(_cls)
