"""BitwiseAnd/Or/Xor and BitShift (integer, numpy broadcasting)."""
from __future__ import annotations

import numpy as np

from ...kernel import NodeInfo, register
from ._binary import Binary, make_binary

for _name, _fn in (("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or), ("BitwiseXor", np.bitwise_xor)):
    for _cls in make_binary(_name, _fn, (18,)):
        register(_cls)


@register
class BitShift(Binary):
    """Shift by ``Y`` bits: arithmetic right shift for signed types; a shift count
    outside ``[0, bit width)`` gives 0 (or -1 for a right shift of a negative value)."""

    op_type = "BitShift"
    since_version = 11

    def _setup(self, node: NodeInfo) -> None:
        self.direction = node.attr("direction")
        if self.direction not in ("LEFT", "RIGHT"):
            raise self.fail("direction must be LEFT or RIGHT")

    def compute(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.dtype.kind not in "iu" or b.dtype.kind not in "iu":
            raise self.fail(f"BitShift needs integer inputs, got {a.dtype} and {b.dtype}")
        bits = a.dtype.itemsize * 8
        b = b.astype(a.dtype, copy=False)
        bad = (b < 0) | (b >= bits)
        shift = np.where(bad, a.dtype.type(0), b) if bad.any() else b
        if self.direction == "LEFT":
            y = np.left_shift(a, shift)
            fill = a.dtype.type(0)
        else:
            y = np.right_shift(a, shift)
            fill = np.right_shift(a, a.dtype.type(bits - 1)) if a.dtype.kind == "i" else a.dtype.type(0)
        return np.where(bad, fill, y) if bad.any() else y
