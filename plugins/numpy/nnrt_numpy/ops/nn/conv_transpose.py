"""ConvTranspose: one batched matmul ``W^T @ X`` per (batch, group), then a
col2im scatter-add per kernel tap.  Handles ``output_shape``,
``output_padding``, ``auto_pad``, groups, strides and dilations."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from ._spatial import col2im_add


@register
class ConvTranspose(Kernel):
    op_type = "ConvTranspose"
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.auto_pad = node.attr("auto_pad", "NOTSET")
        if self.auto_pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
            raise self.fail(f"unknown auto_pad {self.auto_pad!r}")
        self.group = int(node.attr("group", 1))
        self.kernel_shape = node.attr("kernel_shape")
        self.strides = node.attr("strides")
        self.dilations = node.attr("dilations")
        self.pads = node.attr("pads")
        self.output_padding = node.attr("output_padding")
        self.output_shape = node.attr("output_shape")

    def _geometry(self, in_shape, kernel):
        nd = len(in_shape)
        s = list(self.strides or [1] * nd)
        d = list(self.dilations or [1] * nd)
        op = list(self.output_padding or [0] * nd)
        if len(s) != nd or len(d) != nd or len(op) != nd:
            raise self.fail("strides, dilations and output_padding need one entry per spatial axis")
        full = [s[i] * (in_shape[i] - 1) + (kernel[i] - 1) * d[i] + 1 + op[i] for i in range(nd)]
        if self.output_shape is not None:
            if len(self.output_shape) < nd:
                raise self.fail(f"output_shape {list(self.output_shape)} has fewer than {nd} entries "
                                "(one per spatial axis)")
            out = list(self.output_shape)[-nd:]
            total = [full[i] - out[i] for i in range(nd)]
            lower = self.auto_pad == "SAME_LOWER"
            begin = [t - int(t / 2) if lower else int(t / 2) for t in total]
        elif self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out = [in_shape[i] * s[i] for i in range(nd)]
            total = [full[i] - out[i] for i in range(nd)]
            lower = self.auto_pad == "SAME_LOWER"
            begin = [t - t // 2 if lower else t // 2 for t in total]
        else:
            pads = list(self.pads or [0] * (2 * nd)) if self.auto_pad != "VALID" else [0] * (2 * nd)
            if len(pads) != 2 * nd:
                raise self.fail("pads needs two entries per spatial axis")
            begin = pads[:nd]
            out = [full[i] - pads[i] - pads[i + nd] for i in range(nd)]
        if any(o < 0 for o in out):
            raise self.fail(f"negative output size {out}")
        return s, d, begin, out, full

    def __call__(self, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> tuple[np.ndarray]:
        n, c = x.shape[:2]
        g = self.group
        nd = x.ndim - 2
        if w.ndim != x.ndim or w.shape[0] != c or c % g:
            raise self.fail(f"weight shape {w.shape} does not match input {x.shape} with group {g}")
        kernel = list(w.shape[2:])
        if self.kernel_shape is not None and list(self.kernel_shape) != kernel:
            raise self.fail(f"kernel_shape {self.kernel_shape} does not match weight {w.shape}")
        mg = w.shape[1]
        s, d, begin, out, full = self._geometry(x.shape[2:], kernel)
        k = int(np.prod(kernel))
        wt = w.reshape(g, c // g, mg * k).transpose(0, 2, 1)  # (g, mg*k, c/g)
        cols = np.matmul(wt, x.reshape(n, g, c // g, -1))  # (n, g, mg*k, P)
        cols = cols.reshape((n, g * mg) + tuple(kernel) + tuple(x.shape[2:]))
        size = [max(full[i], begin[i] + out[i]) for i in range(nd)]
        lo = [min(bg, 0) for bg in begin]
        buf = np.zeros((n, g * mg) + tuple(sz - l for sz, l in zip(size, lo)), dtype=np.result_type(x, w))
        inner = buf[(slice(None), slice(None)) + tuple(slice(-l, None) for l in lo)]
        col2im_add(cols, inner, kernel, s, d, x.shape[2:])
        y = buf[(slice(None), slice(None)) + tuple(slice(begin[i] - lo[i], begin[i] - lo[i] + out[i])
                                                   for i in range(nd))]
        y = np.ascontiguousarray(y)
        if b is not None:
            y += b.reshape((1, -1) + (1,) * nd)
        return (y,)
