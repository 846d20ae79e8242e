"""Squeeze and Unsqueeze: ``axes`` is an attribute before opset 13, an input after."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from ._util import int_list, norm_axes


class _SqueezeBase(Kernel):
    op_type = "Squeeze"

    def squeeze(self, x: np.ndarray, axes: list[int] | None) -> np.ndarray:
        if axes is None:
            return x.reshape(tuple(d for d in x.shape if d != 1))
        ax = norm_axes(axes, x.ndim)
        if ax is None:
            raise self.fail(f"axes {axes} out of range or repeated for rank {x.ndim}")
        if any(x.shape[a] != 1 for a in ax):
            raise self.fail(f"cannot squeeze axes {axes} of shape {x.shape}: dimension is not 1")
        return x.reshape(tuple(d for i, d in enumerate(x.shape) if i not in ax))


@register
class Squeeze1(_SqueezeBase):
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.axes = int_list(node.attr("axes"))

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        return (self.squeeze(x, self.axes),)


@register
class Squeeze13(_SqueezeBase):
    since_version = 13

    def __call__(self, x: np.ndarray, axes: np.ndarray | None = None) -> tuple[np.ndarray]:
        return (self.squeeze(x, int_list(axes)),)


class _UnsqueezeBase(Kernel):
    op_type = "Unsqueeze"

    def unsqueeze(self, x: np.ndarray, axes: list[int] | None) -> np.ndarray:
        if axes is None:
            raise self.fail("axes is required")
        rank = x.ndim + len(axes)
        ax = norm_axes(axes, rank)
        if ax is None:
            raise self.fail(f"axes {axes} out of range or repeated for output rank {rank}")
        shape = []
        it = iter(x.shape)
        for i in range(rank):
            shape.append(1 if i in ax else next(it))
        return x.reshape(shape)


@register
class Unsqueeze1(_UnsqueezeBase):
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.axes = int_list(node.attr("axes"))
        if self.axes is None:
            raise self.fail("attribute axes is required before opset 13")

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        return (self.unsqueeze(x, self.axes),)


@register
class Unsqueeze13(_UnsqueezeBase):
    since_version = 13

    def __call__(self, x: np.ndarray, axes: np.ndarray) -> tuple[np.ndarray]:
        return (self.unsqueeze(x, int_list(axes)),)
