"""Add, Sub, Mul, Div (all versions).

Integer Div truncates toward zero (like C and ONNX Runtime); integer overflow
wraps; integer division by zero yields 0 instead of trapping.
"""
from __future__ import annotations

import numpy as np

from ...kernel import register
from ._binary import make_binary


def div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        q = np.floor_divide(a, b)
        if a.dtype.kind == "i":
            r = a - q * b
            q = q + ((r != 0) & ((a < 0) != (b < 0))).astype(q.dtype)
        return q
    return np.divide(a, b)


_VERSIONS = (1, 6, 7, 13, 14)
for _name, _fn in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", div)):
    for _cls in make_binary(_name, _fn, _VERSIONS):
        register(_cls)
