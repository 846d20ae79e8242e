"""Reshape: opsets 1-4 take the shape as an attribute, 5+ as an input; 14 adds
``allowzero`` (a 0 in the shape is then a real 0 instead of "copy this dim")."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from ._util import int_list


class _ReshapeBase(Kernel):
    allowzero = False

    def target(self, in_shape: tuple[int, ...], shape: list[int]) -> tuple[int, ...]:
        out = list(shape)
        if out.count(-1) > 1:
            raise self.fail("at most one dimension of the new shape may be -1")
        if self.allowzero and 0 in out and -1 in out:
            raise self.fail("with allowzero=1 the shape may not contain both 0 and -1")
        for i, d in enumerate(out):
            if d == 0 and not self.allowzero:
                if i >= len(in_shape):
                    raise self.fail(f"shape[{i}] = 0 copies a dimension the input does not have")
                out[i] = in_shape[i]
            elif d < -1:
                raise self.fail(f"invalid dimension {d} in the new shape")
        size = int(np.prod(in_shape))
        if -1 in out:
            known = int(np.prod([d for d in out if d != -1]))
            if known == 0 or size % known:
                raise self.fail(f"cannot reshape {tuple(in_shape)} into {tuple(shape)}")
            out[out.index(-1)] = size // known
        if int(np.prod(out)) != size:
            raise self.fail(f"cannot reshape {tuple(in_shape)} into {tuple(shape)}")
        return tuple(out)


@register
class Reshape1(_ReshapeBase):
    op_type = "Reshape"
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        shape = node.attr("shape")
        if shape is None:
            raise self.fail("attribute shape is required before opset 5")
        self.shape = int_list(shape)

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        return (x.reshape(self.target(x.shape, self.shape)),)


@register
class Reshape5(_ReshapeBase):
    op_type = "Reshape"
    since_version = 5

    def _setup(self, node: NodeInfo) -> None:
        self.allowzero = bool(node.attr("allowzero", 0))
        self._cache: dict = {}

    def __call__(self, x: np.ndarray, shape: np.ndarray) -> tuple[np.ndarray]:
        key = (x.shape, shape.tobytes())
        out = self._cache.get(key)
        if out is None:
            if shape.ndim != 1:
                raise self.fail("shape must be a 1-D tensor")
            out = self.target(x.shape, int_list(shape))
            if len(self._cache) < 64:
                self._cache[key] = out
        return (x.reshape(out),)
