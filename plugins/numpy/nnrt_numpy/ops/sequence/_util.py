"""Helpers shared by the sequence kernels (sequences are Python lists of arrays)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np


def as_sequence(seq: Any, fail: Callable[[str], Exception]) -> list:
    if not isinstance(seq, (list, tuple)):
        raise fail(f"expected a sequence (list of tensors), got {type(seq).__name__}")
    return list(seq)


def position(pos: Any, length: int, fail: Callable[[str], Exception], inclusive_end: bool = False) -> int:
    """Normalize a scalar position against a sequence of ``length``.

    Valid range is ``[-length, length - 1]`` (``[-length, length]`` with
    ``inclusive_end`` for insertion)."""
    p = np.asarray(pos)
    if p.size != 1 or p.dtype.kind not in "iu":
        raise fail(f"position must be an integer scalar, got {p.dtype} of shape {p.shape}")
    i = int(p.reshape(()))
    hi = length if inclusive_end else length - 1
    if not -length <= i <= hi:
        raise fail(f"position {i} out of range for a sequence of length {length}")
    return i + length if i < 0 else i
