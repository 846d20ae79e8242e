"""RoiAlign (opsets 10, 16, 22): average or max pooling of bilinearly sampled
points in each region of interest (Mask R-CNN).  Version 10 uses
``output_half_pixel`` coordinates; 16+ adds ``coordinate_transformation_mode``
(default ``half_pixel``).  The per-ROI loop is vectorized over bins, samples
and channels."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register


class _RoiAlignBase(Kernel):
    op_type = "RoiAlign"
    _default_ctm = "output_half_pixel"
    _has_ctm = False

    def _setup(self, node: NodeInfo) -> None:
        mode = node.attr("mode", "avg")
        self.mode = mode.decode() if isinstance(mode, bytes) else mode
        if self.mode not in ("avg", "max"):
            raise self.fail(f"mode must be avg or max, got {self.mode!r}")
        self.oh = int(node.attr("output_height", 1))
        self.ow = int(node.attr("output_width", 1))
        self.sampling = int(node.attr("sampling_ratio", 0))
        self.scale = float(node.attr("spatial_scale", 1.0))
        ctm = node.attr("coordinate_transformation_mode", self._default_ctm) if self._has_ctm else self._default_ctm
        ctm = ctm.decode() if isinstance(ctm, bytes) else ctm
        if ctm not in ("half_pixel", "output_half_pixel"):
            raise self.fail(f"coordinate_transformation_mode must be half_pixel or output_half_pixel, got {ctm!r}")
        self.half_pixel = ctm == "half_pixel"
        if not np.isfinite(self.scale):
            raise self.fail(f"spatial_scale must be finite, got {self.scale}")
        if self.oh <= 0 or self.ow <= 0 or self.sampling < 0:
            raise self.fail("output sizes must be positive and sampling_ratio non-negative")

    def __call__(self, x, rois, batch_indices) -> Sequence[Any]:
        x = np.asarray(x)
        rois = np.asarray(rois)
        bidx = np.asarray(batch_indices).astype(np.int64)
        if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 4 or bidx.shape != (rois.shape[0],):
            raise self.fail(f"expected X (N,C,H,W), rois (R,4), batch_indices (R,); got {x.shape}, {rois.shape}, {bidx.shape}")
        n, c, h, w = x.shape
        if bidx.size and (bidx.min() < 0 or bidx.max() >= n):
            raise self.fail("batch_indices out of range")
        with np.errstate(all="ignore"):
            scaled = rois.astype(np.float64) * self.scale
        if scaled.size and not (np.isfinite(scaled).all() and np.abs(scaled).max() < 2.0**31):
            raise self.fail(f"rois scaled by spatial_scale {self.scale} leave the range of pixel coordinates "
                            "(finite, below 2**31 in magnitude)")
        comp = np.float64 if x.dtype == np.float64 else np.float32
        self.check_alloc((rois.shape[0], c, self.oh, self.ow), comp)
        xf = x.astype(comp)
        out = np.zeros((rois.shape[0], c, self.oh, self.ow), dtype=comp)
        off = 0.5 if self.half_pixel else 0.0
        for r in range(rois.shape[0]):
            x1, y1, x2, y2 = (float(v) * self.scale - off for v in rois[r])
            rw, rh = x2 - x1, y2 - y1
            if not self.half_pixel:
                rw, rh = max(rw, 1.0), max(rh, 1.0)
            bh, bw = rh / self.oh, rw / self.ow
            gh = self.sampling if self.sampling > 0 else int(np.ceil(rh / self.oh))
            gw = self.sampling if self.sampling > 0 else int(np.ceil(rw / self.ow))
            gh, gw = max(gh, 1), max(gw, 1)
            self.check_alloc((c, self.oh, gh, self.ow, gw), comp, "sampling grid")  # the broadcast terms below
            ys = y1 + np.arange(self.oh)[:, None] * bh + (np.arange(gh)[None, :] + 0.5) * bh / gh  # (oh, gh)
            xs = x1 + np.arange(self.ow)[:, None] * bw + (np.arange(gw)[None, :] + 0.5) * bw / gw  # (ow, gw)
            yl, yh, ly, yvalid = self._axis(ys, h)
            xl, xh, lx, xvalid = self._axis(xs, w)
            img = xf[bidx[r]]  # (C, H, W)
            # broadcast to (C, oh, gh, ow, gw)
            Y = lambda a: a[None, :, :, None, None]  # noqa: E731
            X = lambda a: a[None, None, None, :, :]  # noqa: E731
            valid = Y(yvalid) & X(xvalid)
            hy, hx = 1 - ly, 1 - lx
            terms = [
                Y(hy) * X(hx) * img[:, yl[:, :, None, None], xl[None, None]],
                Y(hy) * X(lx) * img[:, yl[:, :, None, None], xh[None, None]],
                Y(ly) * X(hx) * img[:, yh[:, :, None, None], xl[None, None]],
                Y(ly) * X(lx) * img[:, yh[:, :, None, None], xh[None, None]],
            ]
            if self.mode == "avg":
                s = np.where(valid, terms[0] + terms[1] + terms[2] + terms[3], 0)
                out[r] = s.sum(axis=(2, 4)) / (gh * gw)
            else:
                m = np.maximum(np.maximum(terms[0], terms[1]), np.maximum(terms[2], terms[3]))
                m = np.where(valid, m, 0)
                out[r] = m.max(axis=(2, 4))
        return (out.astype(x.dtype),)

    @staticmethod
    def _axis(v: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Low/high taps, fractional weight and validity of sample coordinates along one axis."""
        valid = (v >= -1.0) & (v <= size)
        v = np.maximum(v, 0.0)
        low = np.floor(v).astype(np.int64)
        at_end = low >= size - 1
        low = np.where(at_end, size - 1, low)
        high = np.where(at_end, size - 1, low + 1)
        v = np.where(at_end, low.astype(v.dtype), v)
        return low, high, v - low, valid


@register
class RoiAlign10(_RoiAlignBase):
    since_version = 10


@register
class RoiAlign16(_RoiAlignBase):
    since_version = 16
    _default_ctm = "half_pixel"
    _has_ctm = True
