"""Expand (bidirectional broadcast to a shape) and Tile."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, register
from ._util import int_list


@register
class Expand(Kernel):
    op_type = "Expand"
    since_version = 8

    def __call__(self, x: np.ndarray, shape: np.ndarray) -> tuple[np.ndarray]:
        dims = int_list(shape)
        try:
            out = np.broadcast_shapes(x.shape, tuple(dims))
        except ValueError:
            raise self.fail(f"cannot expand {x.shape} to {tuple(dims)}") from None
        self.check_alloc(out, x.dtype)
        return (np.broadcast_to(x, out).copy(),)


@register
class Tile1(Kernel):
    """Tile-1: repeat ``tiles`` times along the single ``axis`` (both scalar inputs)."""

    op_type = "Tile"
    since_version = 1

    def __call__(self, x: np.ndarray, tiles: np.ndarray, axis: np.ndarray) -> tuple[np.ndarray]:
        a, t = int(axis.reshape(-1)[0]), int(tiles.reshape(-1)[0])
        if not -x.ndim <= a < x.ndim or t < 0:
            raise self.fail(f"invalid axis {a} or tiles {t}")
        reps = [1] * x.ndim
        reps[a % x.ndim] = t
        self.check_alloc([d * r for d, r in zip(x.shape, reps)], x.dtype)
        return (np.tile(x, reps),)


@register
class Tile(Kernel):
    op_type = "Tile"
    since_version = 6

    def __call__(self, x: np.ndarray, repeats: np.ndarray) -> tuple[np.ndarray]:
        reps = int_list(repeats)
        if len(reps) != x.ndim:
            raise self.fail(f"repeats has {len(reps)} entries for an input of rank {x.ndim}")
        if any(r < 0 for r in reps):
            raise self.fail("repeats must be non-negative")
        self.check_alloc([d * r for d, r in zip(x.shape, reps)], x.dtype)
        return (np.tile(x, reps),)
