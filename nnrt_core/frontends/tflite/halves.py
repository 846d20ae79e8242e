"""fp16 constants to float32, in the layout the graph needs, in one pass."""
from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["LUT_MIN", "half_to_float"]

#: fp16 constants of at least this many values are converted through a table of all 65536
#: halves (numpy's ``astype`` per value, built once): ``take`` is ~1.4x faster on large weights
#: and slower on small ones (one call's cost)
LUT_MIN = 512
_HALVES: list[np.ndarray] = []


def half_to_float(data: np.ndarray, perm: Sequence[int] | None = None) -> np.ndarray:
    """``np.ascontiguousarray(data.transpose(perm)).astype(np.float32)`` for an fp16 array
    (no transpose when ``perm`` is ``None``), bit for bit (the table holds ``astype``'s own
    result for every half, NaN payloads included), C-contiguous, converted and laid out in
    one pass over the data."""
    if perm is not None:
        data = data.transpose(perm)
    if data.size < LUT_MIN:
        return data.astype(np.float32, order="C")
    if not _HALVES:
        _HALVES.append(np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32))
    # the result has the (transposed) index's shape, C order; every uint16 is a valid index of the
    # 65536 entries, so ``mode="wrap"`` changes nothing but skips the bounds error path (~10 % faster)
    return _HALVES[0].take(data.view(np.uint16), mode="wrap")
