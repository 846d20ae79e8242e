"""ConvInteger: integer convolution ``(x - x_zero_point) * (w - w_zero_point)``
with int32 output; ``w_zero_point`` may be per output channel."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, dtypes, register

from ._conv import conv_nd, parse_conv_attrs


def channel_param(p: np.ndarray, m: int, rank: int, fail, name: str) -> np.ndarray:
    """A scalar or per-output-channel (1-D of length M) parameter shaped (M, 1, ...)."""
    p = np.asarray(p)
    if p.size == 1:
        return p.reshape(())
    if p.ndim == 1 and p.shape[0] == m:
        return p.reshape((m,) + (1,) * (rank - 1))
    raise fail(f"{name} of shape {p.shape} must be a scalar or have one entry per output channel ({m})")


@register
class ConvInteger(Kernel):
    op_type = "ConvInteger"
    since_version = 10
    input_dtypes = dtypes(np.int8, np.uint8)

    def _setup(self, node: NodeInfo) -> None:
        self.attrs = parse_conv_attrs(node, self.fail)

    def __call__(self, x, w, x_zero_point=None, w_zero_point=None) -> Sequence[Any]:
        x = np.asarray(x)
        w = np.asarray(w)
        xf = x.astype(np.float64)
        wf = w.astype(np.float64)
        if x_zero_point is not None:
            zp = np.asarray(x_zero_point)
            if zp.size != 1:
                raise self.fail("x_zero_point must be a scalar (per-tensor)")
            xf = xf - float(zp.reshape(()))
        if w_zero_point is not None:
            wf = wf - channel_param(w_zero_point, w.shape[0], w.ndim, self.fail, "w_zero_point").astype(np.float64)
        y = conv_nd(xf, wf, self.attrs, self.fail)
        return (np.rint(y).astype(np.int32),)
