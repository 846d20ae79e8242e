"""BitCast (opset 26): reinterpret the little-endian bytes of a tensor as
another type of the same bit width (numpy ``view``)."""
from __future__ import annotations

import numpy as np

from nnrt_core.ir.dtypes import DataType

from ...kernel import Kernel, NodeInfo, register


@register
class BitCast(Kernel):
    op_type = "BitCast"
    since_version = 26

    def _setup(self, node: NodeInfo) -> None:
        to = node.attr("to")
        try:
            self.to = DataType(int(to)).numpy
        except (TypeError, ValueError) as e:
            raise self.fail(f"unsupported target type {to}: {e}") from None
        if self.to.kind == "O":
            raise self.fail("strings cannot be bitcast")

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        if x.dtype.kind == "O" or x.dtype.itemsize != self.to.itemsize:
            raise self.fail(f"cannot bitcast {x.dtype} to {self.to}: bit widths differ")
        src = x if x.dtype.byteorder in "=|<" else x.astype(x.dtype.newbyteorder("<"))
        return (np.ascontiguousarray(src).view(self.to).reshape(x.shape),)
