"""QLinearAveragePool (com.microsoft): dequantize, average-pool in float32
(``kernel_shape``, ``strides``, ``pads`` / ``auto_pad``, ``ceil_mode``,
``count_include_pad``, optional NHWC via ``channels_last``), requantize."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._qelementwise import dequant, quant
from ._util import MS


def average_pool(x: np.ndarray, kernel, strides, pads, auto_pad: str, ceil_mode: bool, count_include_pad: bool) -> np.ndarray:
    """Average pooling of ``x`` (N, C, *S)."""
    nsp = x.ndim - 2
    spatial = x.shape[2:]
    begin, end, outs = [], [], []
    for i in range(nsp):
        k, s, n = kernel[i], strides[i], spatial[i]
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out = -(-n // s)
            total = max((out - 1) * s + k - n, 0)
            b = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            e = total - b
        elif auto_pad == "VALID":
            b = e = 0
            out = (n - k) // s + 1
        else:
            b, e = pads[i], pads[nsp + i]
            span = n + b + e - k
            out = (-(-span // s) if ceil_mode else span // s) + 1
            if ceil_mode and (out - 1) * s >= n + b:
                out -= 1
        begin.append(b)
        end.append(e)
        outs.append(out)
    extra = [max(0, (outs[i] - 1) * strides[i] + kernel[i] - (spatial[i] + begin[i] + end[i])) for i in range(nsp)]
    width = [(0, 0), (0, 0)] + [(begin[i], end[i] + extra[i]) for i in range(nsp)]
    xp = np.pad(x, width)
    if count_include_pad:
        ones = np.pad(np.ones(spatial, dtype=x.dtype), [(b, e) for b, e in zip(begin, end)], constant_values=1)
        ones = np.pad(ones, [(0, ex) for ex in extra])
    else:
        ones = np.pad(np.ones(spatial, dtype=x.dtype), [(b, e + ex) for b, e, ex in zip(begin, end, extra)])
    axes = tuple(range(2, 2 + nsp))
    sel = tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(outs, strides))
    win = sliding_window_view(xp, tuple(kernel), axis=axes)[(slice(None), slice(None)) + sel]
    sums = win.sum(axis=tuple(range(-nsp, 0)))
    cwin = sliding_window_view(ones, tuple(kernel))[sel]
    counts = cwin.sum(axis=tuple(range(-nsp, 0)))
    return sums / np.maximum(counts, 1)


@register
class QLinearAveragePool(Kernel):
    op_type = "QLinearAveragePool"
    domain = MS
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        ks = node.attr("kernel_shape")
        if ks is None:
            raise self.fail("the 'kernel_shape' attribute is required")
        self.kernel = [int(k) for k in ks]
        n = len(self.kernel)
        self.strides = [int(s) for s in (node.attr("strides") or [1] * n)]
        self.pads = [int(p) for p in (node.attr("pads") or [0] * (2 * n))]
        ap = node.attr("auto_pad", "NOTSET")
        self.auto_pad = ap.decode() if isinstance(ap, bytes) else ap
        if self.auto_pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
            raise self.fail(f"invalid auto_pad {self.auto_pad!r}")
        if len(self.strides) != n or len(self.pads) != 2 * n:
            raise self.fail("strides/pads lengths do not match kernel_shape")
        if any(k < 1 for k in self.kernel) or any(s < 1 for s in self.strides) or any(p < 0 for p in self.pads):
            raise self.fail("kernel_shape and strides must be positive and pads non-negative")
        if any(self.pads[i] >= self.kernel[i] or self.pads[n + i] >= self.kernel[i] for i in range(n)):
            raise self.fail("pads must be smaller than the kernel")
        self.ceil_mode = bool(node.attr("ceil_mode", 0))
        self.count_include_pad = bool(node.attr("count_include_pad", 0))
        self.channels_last = bool(node.attr("channels_last", 0))

    def __call__(self, x, x_scale, x_zp=None, y_scale=None, y_zp=None) -> Sequence[Any]:
        x = np.asarray(x)
        if x.ndim != len(self.kernel) + 2:
            raise self.fail(f"input rank {x.ndim} does not match kernel_shape {self.kernel}")
        f = dequant(x, x_scale, x_zp, self.fail, "X")
        if self.channels_last:
            f = np.moveaxis(f, -1, 1)
        y = average_pool(f, self.kernel, self.strides, self.pads, self.auto_pad, self.ceil_mode, self.count_include_pad)
        if self.channels_last:
            y = np.moveaxis(y, 1, -1)
        return (quant(y.astype(np.float32), y_scale, y_zp, x.dtype, self.fail),)
