"""Comparison and logical binary ops (bool output), all versions."""
from __future__ import annotations

import numpy as np

from ...kernel import register
from ._binary import make_binary

_OPS = {
    "Equal": (np.equal, (1, 7, 11, 13, 19)),
    "Greater": (np.greater, (1, 7, 9, 13)),
    "Less": (np.less, (1, 7, 9, 13)),
    "GreaterOrEqual": (np.greater_equal, (12, 16)),
    "LessOrEqual": (np.less_equal, (12, 16)),
    "And": (np.logical_and, (1, 7)),
    "Or": (np.logical_or, (1, 7)),
    "Xor": (np.logical_xor, (1, 7)),
}

for _name, (_fn, _versions) in _OPS.items():
    for _cls in make_binary(_name, _fn, _versions):
        register(_cls)
