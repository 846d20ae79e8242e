"""MaxUnpool: scatter the pooled values back to the positions given by the
MaxPool indices into a zero tensor (default shape from kernel/strides/pads,
or the optional ``output_shape`` input, into whose leading corner the unpooled
tensor is placed)."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from ..tensor._util import int_list


@register
class MaxUnpool(Kernel):
    op_type = "MaxUnpool"
    since_version = 9

    def _setup(self, node: NodeInfo) -> None:
        ks = node.attr("kernel_shape")
        if ks is None:
            raise self.fail("attribute kernel_shape is required")
        self.kernel = [int(k) for k in ks]
        nd = len(self.kernel)
        self.strides = [int(v) for v in node.attr("strides", [1] * nd)]
        self.pads = [int(v) for v in node.attr("pads", [0] * (2 * nd))]
        if len(self.strides) != nd or len(self.pads) != 2 * nd:
            raise self.fail(f"kernel_shape has {nd} axes but strides has {len(self.strides)} and pads "
                            f"{len(self.pads)} values; expected {nd} and {2 * nd}")
        if min(self.kernel + self.strides, default=1) < 1 or min(self.pads, default=0) < 0:
            raise self.fail("kernel_shape and strides must be >= 1 and pads >= 0")

    def __call__(self, x: np.ndarray, indices: np.ndarray, output_shape: np.ndarray | None = None) -> tuple[np.ndarray]:
        nd = len(self.kernel)
        if x.ndim != nd + 2 or indices.shape != x.shape:
            raise self.fail(f"X has shape {x.shape} and indices {indices.shape}; expected equal shapes of rank "
                            f"{nd + 2} (N, C and one axis per kernel_shape entry)")
        sp = x.shape[2:]
        default = x.shape[:2] + tuple(
            (sp[i] - 1) * self.strides[i] + self.kernel[i] - self.pads[i] - self.pads[i + nd] for i in range(nd))
        shape = default if output_shape is None else tuple(int_list(output_shape))
        if len(shape) != x.ndim or any(s < d for s, d in zip(shape, default)):
            raise self.fail(f"output_shape {shape} is smaller than the unpooled shape {default}")
        self.check_alloc(shape, x.dtype)
        idx = indices.reshape(-1).astype(np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= int(np.prod(default))):
            raise self.fail("indices out of range for the unpooled shape")
        if shape != default:  # indices address the unpooled shape; place it top-left
            idx = np.ravel_multi_index(np.unravel_index(idx, default), shape)
        y = np.zeros(int(np.prod(shape)), dtype=x.dtype)
        y[idx] = x.reshape(-1)
        return (y.reshape(shape),)
