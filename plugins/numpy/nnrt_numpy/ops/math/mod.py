"""Mod: modulo with the divisor's sign (``fmod=0``, Python/numpy ``mod``) or with
the dividend's sign (``fmod=1``, C ``fmod``)."""
from __future__ import annotations

import numpy as np

from ...kernel import NodeInfo, register
from ._binary import Binary


@register
class Mod(Binary):
    op_type = "Mod"
    since_version = 10

    def _setup(self, node: NodeInfo) -> None:
        self.fmod = bool(node.attr("fmod", 0))

    def compute(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.fmod(a, b) if self.fmod else np.mod(a, b)
