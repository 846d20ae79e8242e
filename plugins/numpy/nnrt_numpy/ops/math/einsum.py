"""Einsum (``np.einsum`` with a cached contraction path).  Computed in the input
dtype, except ml_dtypes types (bfloat16...) which go through float32."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


@register
class Einsum(Kernel):
    op_type = "Einsum"
    since_version = 12

    def _setup(self, node: NodeInfo) -> None:
        eq = node.attr("equation")
        if not eq:
            raise self.fail("attribute equation is required")
        self.equation = eq.replace(" ", "")
        self._paths: dict = {}

    def __call__(self, *xs: np.ndarray) -> tuple[np.ndarray]:
        dtype = xs[0].dtype
        if any(x.dtype.kind == "V" for x in xs):  # ml_dtypes (bfloat16...): compute in float32
            xs = tuple(x.astype(np.float32) for x in xs)
        key = tuple(x.shape for x in xs)
        try:
            path = self._paths.get(key)
            if path is None:
                path = np.einsum_path(self.equation, *xs, optimize="greedy")[0]
                self._paths[key] = path
            y = np.einsum(self.equation, *xs, optimize=path)
        except ValueError as e:
            raise self.fail(f"invalid equation or operand shapes: {e}") from None
        return (np.asarray(y).astype(dtype, copy=False),)
