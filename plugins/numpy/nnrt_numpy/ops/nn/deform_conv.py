"""DeformConv (opset 19): convolution whose sampling grid is shifted by learned
offsets (bilinear interpolation, zero outside the image) and optionally
modulated by a mask.  Sampling is vectorized over every (tap, output pixel);
the contraction is one batched matmul per (batch, group)."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


@register
class DeformConv(Kernel):
    op_type = "DeformConv"
    since_version = 19

    def _setup(self, node: NodeInfo) -> None:
        self.group = int(node.attr("group", 1))
        self.offset_group = int(node.attr("offset_group", 1))
        self.kernel_shape = node.attr("kernel_shape")
        self.strides = node.attr("strides")
        self.dilations = node.attr("dilations")
        self.pads = node.attr("pads")

    def __call__(self, x, w, offset, b=None, mask=None) -> tuple[np.ndarray]:
        if x.ndim != 4:
            raise self.fail("only 2-D DeformConv is supported")
        n, c, h, wd = x.shape
        m, cg, kh, kw = w.shape
        g, og = self.group, self.offset_group
        if c != cg * g or c % og or m % g:
            raise self.fail(f"channel counts do not match group={g}, offset_group={og}")
        sh, sw = self.strides or (1, 1)
        dh, dw = self.dilations or (1, 1)
        pt, pl, pb, pr = self.pads or (0, 0, 0, 0)
        oh = (h + pt + pb - ((kh - 1) * dh + 1)) // sh + 1
        ow = (wd + pl + pr - ((kw - 1) * dw + 1)) // sw + 1
        k = kh * kw
        off = offset.reshape(n, og, k, 2, oh, ow)
        base_y = (np.arange(oh) * sh - pt)[:, None] + (np.arange(kh) * dh).repeat(kw)[:, None, None]
        base_x = (np.arange(ow) * sw - pl)[None, :] + np.tile(np.arange(kw) * dw, kh)[:, None, None]
        py = base_y[None, None] + off[:, :, :, 0]  # (n, og, k, oh, ow)
        px = base_x[None, None] + off[:, :, :, 1]
        y0 = np.floor(py)
        x0 = np.floor(px)
        ly, lx = py - y0, px - x0
        y0 = y0.astype(np.int64)
        x0 = x0.astype(np.int64)
        xg = x.reshape(n, og, c // og, h * wd)
        sampled = np.zeros((n, og, c // og, k, oh, ow), dtype=x.dtype)
        nidx = np.arange(n)[:, None, None, None, None]
        gidx = np.arange(og)[None, :, None, None, None]
        for yy, xx, wgt in ((y0, x0, (1 - ly) * (1 - lx)), (y0, x0 + 1, (1 - ly) * lx),
                            (y0 + 1, x0, ly * (1 - lx)), (y0 + 1, x0 + 1, ly * lx)):
            valid = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < wd)
            flat = np.where(valid, yy * wd + xx, 0)
            vals = xg[nidx, gidx, :, flat]  # (n, og, k, oh, ow, c/og)
            coef = np.where(valid, wgt, 0).astype(x.dtype)
            sampled += np.moveaxis(vals, -1, 2) * coef[:, :, None]
        if mask is not None:
            sampled *= mask.reshape(n, og, 1, k, oh, ow).astype(x.dtype)
        cols = sampled.reshape(n, g, (c // g) * k, oh * ow)
        y = np.matmul(w.reshape(g, m // g, -1), cols).reshape(n, m, oh, ow)
        if b is not None:
            y += b.reshape(1, -1, 1, 1)
        return (y,)
