"""QuickGelu (com.microsoft): ``x * sigmoid(alpha * x)``, alpha defaults to 1.702."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._util import MS, sigmoid


@register
class QuickGelu(Kernel):
    op_type = "QuickGelu"
    domain = MS
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.alpha = float(node.attr("alpha", 1.702))

    def __call__(self, x) -> Sequence[Any]:
        x = np.asarray(x)
        return ((x * sigmoid(x * np.asarray(self.alpha, dtype=x.dtype))).astype(x.dtype, copy=False),)
