"""AffineGrid (opset 20): the sampling grid ``(N, H, W, 2)`` / ``(N, D, H, W, 3)``
of a batch of 2-D / 3-D affine matrices ``theta`` over normalized [-1, 1]
coordinates (pixel centers, or corners with ``align_corners``)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register


def _base(n: int, align: bool) -> np.ndarray:
    if align:
        return np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(n)
    return (np.arange(n) * 2.0 + 1.0) / n - 1.0


@register
class AffineGrid(Kernel):
    op_type = "AffineGrid"
    since_version = 20

    def _setup(self, node: NodeInfo) -> None:
        self.align = bool(node.attr("align_corners", 0))

    def __call__(self, theta, size) -> Sequence[Any]:
        theta = np.asarray(theta)
        size = [int(s) for s in np.asarray(size).ravel()]
        if len(size) in (4, 5):  # the grid: N x spatial x (rank - 2); the points in float64 first
            self.check_alloc([size[0], *size[2:], len(size) - 1], np.float64, "grid")
        if len(size) == 4:
            n, _, h, w = size
            if theta.shape != (n, 2, 3):
                raise self.fail(f"theta must have shape ({n}, 2, 3), got {theta.shape}")
            ys, xs = np.meshgrid(_base(h, self.align), _base(w, self.align), indexing="ij")
            pts = np.stack([xs, ys, np.ones_like(xs)], axis=-1)  # (H, W, 3)
        elif len(size) == 5:
            n, _, d, h, w = size
            if theta.shape != (n, 3, 4):
                raise self.fail(f"theta must have shape ({n}, 3, 4), got {theta.shape}")
            zs, ys, xs = np.meshgrid(_base(d, self.align), _base(h, self.align), _base(w, self.align), indexing="ij")
            pts = np.stack([xs, ys, zs, np.ones_like(xs)], axis=-1)  # (D, H, W, 4)
        else:
            raise self.fail(f"size must have 4 or 5 entries, got {len(size)}")
        comp = np.float64 if theta.dtype == np.float64 else np.float32
        th = theta.astype(comp)
        flat = pts.reshape(-1, pts.shape[-1]).astype(comp)
        grid = np.einsum("pk,nik->npi", flat, th)
        return (grid.reshape((n,) + pts.shape[:-1] + (th.shape[1],)).astype(theta.dtype),)
