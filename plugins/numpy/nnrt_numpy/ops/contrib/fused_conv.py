"""FusedConv (com.microsoft): Conv + optional residual ``Z`` + activation
(``activation`` with ``activation_params``)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ..quant._conv import conv_nd, parse_conv_attrs
from ._util import MS, make_activation


@register
class FusedConv(Kernel):
    op_type = "FusedConv"
    domain = MS
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.attrs = parse_conv_attrs(node, self.fail)
        self.act = make_activation(node.attr("activation"), [float(p) for p in node.attr("activation_params", []) or []], self.fail)

    def __call__(self, x, w, b=None, z=None) -> Sequence[Any]:
        x = np.asarray(x)
        comp = np.float64 if x.dtype == np.float64 else np.float32
        y = conv_nd(x.astype(comp, copy=False), np.asarray(w).astype(comp, copy=False), self.attrs, self.fail)
        if b is not None:
            b = np.asarray(b, dtype=comp)
            if b.shape != (y.shape[1],):
                raise self.fail(f"B must have shape ({y.shape[1]},), got {b.shape}")
            y = y + b.reshape((-1,) + (1,) * (y.ndim - 2))
        if z is not None:
            y = y + np.asarray(z, dtype=comp)
        if self.act is not None:
            y = self.act(y)
        return (y.astype(x.dtype, copy=False),)
