"""CenterCropPad: center-crop or zero-pad each listed axis to the requested size
(the smaller half of an odd difference goes to the start)."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from ._util import int_list, norm_axes


@register
class CenterCropPad(Kernel):
    op_type = "CenterCropPad"
    since_version = 18

    def _setup(self, node: NodeInfo) -> None:
        self.axes = int_list(node.attr("axes"))

    def __call__(self, x: np.ndarray, shape: np.ndarray) -> tuple[np.ndarray]:
        sizes = int_list(shape)
        axes = list(range(x.ndim)) if self.axes is None else norm_axes(self.axes, x.ndim)
        if axes is None or len(axes) != len(sizes):
            raise self.fail(f"axes {self.axes} invalid or not matching shape of length {len(sizes)}")
        src = [slice(None)] * x.ndim
        dst = [slice(None)] * x.ndim
        out_shape = list(x.shape)
        for a, size in zip(axes, sizes):
            if size < 0:
                raise self.fail("target sizes must be non-negative")
            dim = x.shape[a]
            out_shape[a] = size
            if size < dim:
                start = (dim - size) // 2
                src[a] = slice(start, start + size)
            elif size > dim:
                start = (size - dim) // 2
                dst[a] = slice(start, start + dim)
        self.check_alloc(out_shape, x.dtype)
        y = np.zeros(out_shape, dtype=x.dtype)
        y[tuple(dst)] = x[tuple(src)]
        return (y,)
