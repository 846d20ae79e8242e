"""Gemm: ``alpha * A' @ B' + beta * C`` (all versions).

Opsets < 7 broadcast C only with ``broadcast=1``; from 11 C is optional.
A constant B is transposed once at compile time (:func:`nnrt_numpy.relayout.transposed`).
A large float product is split over the idle cores as MatMul's
(:func:`nnrt_numpy.parallel.matmul`).
"""
from __future__ import annotations

import numpy as np

from ... import parallel
from ...kernel import Kernel, NodeInfo, register
from ...relayout import transposed


@register
class Gemm(Kernel):
    op_type = "Gemm"
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.alpha = float(node.attr("alpha", 1.0))
        self.beta = float(node.attr("beta", 1.0))
        self.trans_a = bool(node.attr("transA", 0))
        self.trans_b = bool(node.attr("transB", 0))
        self.legacy = node.opset < 7
        self.broadcast = bool(node.attr("broadcast", 0))
        b = node.const(1)
        self._b_src = b
        self._b = transposed(b) if b is not None and self.trans_b else b

    def __call__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> tuple[np.ndarray]:
        if a.ndim != 2 or b.ndim != 2:
            raise self.fail(f"A and B must be 2-D, got {a.shape} and {b.shape}")
        if self.trans_a:
            a = a.T
        if b is self._b_src and b is not None:
            b = self._b
        elif self.trans_b:
            b = b.T
        if a.shape[1] != b.shape[0]:
            raise self.fail(f"inner dimensions differ: {a.shape} @ {b.shape}")
        if parallel.worth_splitting(parallel.work_us("gemm", a.shape[0] * a.shape[1] * b.shape[1])):
            y = parallel.matmul(a, b)  # split when a core is idle
        else:
            y = np.matmul(a, b)
        if self.alpha != 1.0:
            y *= y.dtype.type(self.alpha)
        if c is not None and self.beta != 0.0:
            if self.legacy and not self.broadcast and c.shape != y.shape and c.size != 1:
                raise self.fail(f"C shape {c.shape} differs from {y.shape} and broadcast=0")
            try:
                cb = np.broadcast_to(c, y.shape)
            except ValueError:
                raise self.fail(f"C of shape {c.shape} is not broadcastable to {y.shape}") from None
            if self.beta == 1.0:
                y += cb
            else:
                y += cb * y.dtype.type(self.beta)
        return (y,)
