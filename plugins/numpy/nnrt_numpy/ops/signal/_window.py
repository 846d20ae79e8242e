"""Generalized cosine windows shared by HannWindow, HammingWindow and BlackmanWindow."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo

from ..quant._common import dtype_from_attr
from ._util import scalar_int


class CosineWindow(Kernel):
    """``w[n] = sum_k (-1)^k a_k cos(2 pi k n / N)`` with N = size (periodic) or size - 1."""

    since_version = 17
    coeffs: tuple[float, ...] = ()

    def _setup(self, node: NodeInfo) -> None:
        self.periodic = bool(node.attr("periodic", 1))
        self.out_dtype = dtype_from_attr(int(node.attr("output_datatype", 1)))
        if self.out_dtype.kind not in "fiu":
            raise self.fail(f"unsupported output_datatype {self.out_dtype}")

    def __call__(self, size) -> Sequence[Any]:
        n = scalar_int(size, self.fail, "size")
        if n < 0:
            raise self.fail(f"size must be non-negative, got {n}")
        self.check_alloc([n], np.float64)  # computed in float64
        denom = n if self.periodic else n - 1
        i = np.arange(n, dtype=np.float64)
        w = np.zeros(n)
        for k, a in enumerate(self.coeffs):
            w = w + ((-1) ** k) * a * (np.cos(2 * np.pi * k * i / denom) if k else 1.0)
        return (w.astype(self.out_dtype),)
