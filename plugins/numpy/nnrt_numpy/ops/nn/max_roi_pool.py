"""MaxRoiPool (Caffe/Fast R-CNN style): max over each of ``pooled_shape`` bins of
every region of interest.  Loops over ROIs and bins (ROI counts are small)."""
from __future__ import annotations

import math

import numpy as np

from ...kernel import Kernel, NodeInfo, register


@register
class MaxRoiPool(Kernel):
    op_type = "MaxRoiPool"
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        ps = node.attr("pooled_shape")
        if ps is None or len(ps) != 2:
            raise self.fail("attribute pooled_shape (2 ints) is required")
        self.ph, self.pw = (int(v) for v in ps)
        self.scale = float(node.attr("spatial_scale", 1.0))

    def __call__(self, x: np.ndarray, rois: np.ndarray) -> tuple[np.ndarray]:
        if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 5:
            raise self.fail("expects X of shape (N, C, H, W) and rois of shape (R, 5)")
        n, c, h, w = x.shape
        y = np.zeros((rois.shape[0], c, self.ph, self.pw), dtype=x.dtype)
        for r, (b, x1, y1, x2, y2) in enumerate(rois.astype(np.float64)):
            b = int(b)
            if not 0 <= b < n:
                raise self.fail(f"roi batch index {b} out of range")
            sx, sy = int(round(x1 * self.scale)), int(round(y1 * self.scale))
            ex, ey = int(round(x2 * self.scale)), int(round(y2 * self.scale))
            bh = max(ey - sy + 1, 1) / self.ph
            bw = max(ex - sx + 1, 1) / self.pw
            for i in range(self.ph):
                hs = min(max(int(math.floor(i * bh)) + sy, 0), h)
                he = min(max(int(math.ceil((i + 1) * bh)) + sy, 0), h)
                for j in range(self.pw):
                    ws = min(max(int(math.floor(j * bw)) + sx, 0), w)
                    we = min(max(int(math.ceil((j + 1) * bw)) + sx, 0), w)
                    if he > hs and we > ws:
                        y[r, :, i, j] = x[b, :, hs:he, ws:we].max(axis=(1, 2))
        return (y,)
