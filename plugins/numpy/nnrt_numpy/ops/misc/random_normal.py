"""RandomNormal / RandomNormalLike (opsets 1, 22): samples of N(mean, scale^2)
with a static ``shape`` attribute or the shape of the input tensor."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._random import float_dtype, make_rng


@register
class RandomNormal(Kernel):
    op_type = "RandomNormal"
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        shape = node.attr("shape")
        if shape is None:
            raise self.fail("the 'shape' attribute is required")
        self.shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in self.shape):
            raise self.fail(f"shape must be non-negative, got {list(self.shape)}")
        self.dtype = float_dtype(node.attr("dtype"), np.dtype(np.float32), self.fail)
        self.mean = float(node.attr("mean", 0.0))
        self.scale = float(node.attr("scale", 1.0))
        self.rng = make_rng(node)

    def __call__(self) -> Sequence[Any]:
        return (self.rng.normal(self.mean, self.scale, self.shape).astype(self.dtype),)


@register
class RandomNormalLike(Kernel):
    op_type = "RandomNormalLike"
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        code = node.attr("dtype")
        self.dtype = None if code is None else float_dtype(code, np.dtype(np.float32), self.fail)
        self.mean = float(node.attr("mean", 0.0))
        self.scale = float(node.attr("scale", 1.0))
        self.rng = make_rng(node)

    def __call__(self, x) -> Sequence[Any]:
        x = np.asarray(x)
        dt = self.dtype if self.dtype is not None else x.dtype
        if np.dtype(dt).kind != "f" and str(dt) != "bfloat16":
            raise self.fail(f"output type {dt} is not floating; set the dtype attribute")
        return (self.rng.normal(self.mean, self.scale, x.shape).astype(dt),)
