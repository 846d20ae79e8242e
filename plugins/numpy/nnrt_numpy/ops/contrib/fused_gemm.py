"""FusedGemm (com.microsoft): ``act(alpha * A' @ B' + beta * C)`` with the
activation named by ``activation`` and parameters ``activation_alpha`` /
``activation_beta`` / ``activation_gamma``."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._util import MS, in_place_activation, make_activation


def activation_params(node: NodeInfo) -> list[float]:
    """Positional parameters from the ``activation_alpha/beta/gamma`` attributes."""
    name = node.attr("activation")
    name = name.decode() if isinstance(name, bytes) else name
    params: list[float] = []
    for key in ("activation_alpha", "activation_beta", "activation_gamma"):
        v = node.attr(key)
        if v is None:
            break
        params.append(float(v))
    if name == "Selu" and node.attr("activation_gamma") is not None:
        # Selu takes (alpha, gamma); beta is unused.
        params = [float(node.attr("activation_alpha", 1.67326319217681884765625)), float(node.attr("activation_gamma"))]
    return params


@register
class FusedGemm(Kernel):
    op_type = "FusedGemm"
    domain = MS
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.alpha = float(node.attr("alpha", 1.0))
        self.beta = float(node.attr("beta", 1.0))
        self.trans_a = bool(node.attr("transA", 0))
        self.trans_b = bool(node.attr("transB", 0))
        self.act = make_activation(node.attr("activation"), activation_params(node), self.fail)
        dt = node.dtype(0)
        self.in_place = (in_place_activation(node.attr("activation"), activation_params(node), np.dtype(dt))
                         if dt in (np.dtype(np.float32), np.dtype(np.float64)) else None)

    def __call__(self, a, b, c=None) -> Sequence[Any]:
        a = np.asarray(a)
        b = np.asarray(b)
        if a.ndim != 2 or b.ndim != 2:
            raise self.fail(f"A and B must be 2-D, got {a.shape} and {b.shape}")
        a2 = a.T if self.trans_a else a
        b2 = b.T if self.trans_b else b
        if a2.shape[1] != b2.shape[0]:
            raise self.fail(f"inner dimensions differ: {a2.shape} @ {b2.shape}")
        y = a2 @ b2
        if self.alpha != 1.0:
            y = y * np.asarray(self.alpha, dtype=y.dtype)
        if c is not None and self.beta != 0.0:
            c = np.asarray(c)
            try:
                np.broadcast_shapes(c.shape, y.shape)
            except ValueError:
                raise self.fail(f"C of shape {c.shape} does not broadcast to {y.shape}") from None
            if self.beta == 1.0 and y.dtype == c.dtype and np.broadcast_shapes(c.shape, y.shape) == y.shape:
                np.add(y, c, out=y)  # y is fresh: the same sum without a temporary
            else:
                y = y + np.asarray(self.beta, dtype=y.dtype) * c
        if self.in_place is not None and y.dtype == a.dtype:
            self.in_place(y)
        elif self.act is not None:
            y = self.act(y)
        return (y.astype(a.dtype, copy=False),)
