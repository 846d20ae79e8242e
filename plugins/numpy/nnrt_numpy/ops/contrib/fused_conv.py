"""FusedConv (com.microsoft): Conv + optional residual ``Z`` + activation
(``activation`` with ``activation_params``).

For float32/float64 the convolution runs on the ONNX Conv kernel
(``ops/nn/conv.py``: pointwise matmul, depthwise, im2col + BLAS, weights
prepared at compile time), and the residual and the common activations
(Relu, LeakyRelu, Clip) are applied in place on its output, so graph-level
fusion (optimization level ``all``) is never slower than Conv + Relu.  Other
dtypes take the generic path (``quant/_conv.py:conv_nd``)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ..nn.conv import Conv
from ..quant._conv import conv_nd, parse_conv_attrs
from ._util import MS, in_place_activation, make_activation

_FAST = (np.dtype(np.float32), np.dtype(np.float64))


@register
class FusedConv(Kernel):
    op_type = "FusedConv"
    domain = MS
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.attrs = parse_conv_attrs(node, self.fail)
        params = [float(p) for p in node.attr("activation_params", []) or []]
        self.act = make_activation(node.attr("activation"), params, self.fail)
        self.fast = None
        dt = node.dtype(0)
        if dt in _FAST and all(node.dtype(i) in (None, dt) for i in range(min(node.num_inputs, 4))):
            info = node.replace(
                op_type="Conv", domain="", opset=11, num_inputs=min(node.num_inputs, 3),
                input_present=node.input_present[:3], input_dtypes=node.input_dtypes[:3],
                input_shapes=node.input_shapes[:3], const_inputs=node.const_inputs[:3])
            if Conv.check(info) is None:
                try:
                    self.fast = Conv(info)
                except Exception:  # leave the error (if any) to the generic path at run time
                    self.fast = None
                self.in_place = in_place_activation(node.attr("activation"), params, np.dtype(dt))

    @property
    def accepts_out(self) -> bool:
        return self.fast is not None

    def __call__(self, x, w, b=None, z=None, out=None) -> Sequence[Any]:
        x = np.asarray(x)
        if self.fast is not None and x.dtype in _FAST and np.asarray(w).dtype == x.dtype:
            if b is not None and np.shape(b) != (np.shape(w)[0],):
                raise self.fail(f"B must have shape ({np.shape(w)[0]},), got {np.shape(b)}")
            y = self.fast(x, w, b, out=out)[0]  # a fresh array, or ``out``
            if z is not None:
                z = np.asarray(z, dtype=y.dtype)
                if np.broadcast_shapes(z.shape, y.shape) == y.shape:
                    np.add(y, z, out=y)
                else:
                    y = y + z
            if self.in_place is not None:
                self.in_place(y)
            elif self.act is not None:
                y = self.act(y)
            if out is not None and y is not out:
                np.copyto(out, y)
                y = out
            return (y,)
        comp = np.float64 if x.dtype == np.float64 else np.float32
        y = conv_nd(x.astype(comp, copy=False), np.asarray(w).astype(comp, copy=False), self.attrs, self.fail)
        if b is not None:
            b = np.asarray(b, dtype=comp)
            if b.shape != (y.shape[1],):
                raise self.fail(f"B must have shape ({y.shape[1]},), got {b.shape}")
            y = y + b.reshape((-1,) + (1,) * (y.ndim - 2))
        if z is not None:
            y = y + np.asarray(z, dtype=comp)
        if self.act is not None:
            y = self.act(y)
        y = y.astype(x.dtype, copy=False)
        if out is not None:
            np.copyto(out, y)
            y = out
        return (y,)
