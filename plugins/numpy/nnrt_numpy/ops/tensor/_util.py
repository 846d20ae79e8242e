"""Small helpers shared by the tensor kernels."""
from __future__ import annotations

from typing import Sequence

import numpy as np


def norm_axis(axis: int, rank: int) -> int | None:
    """``axis`` made non-negative, or ``None`` when it is outside ``[-rank, rank)``."""
    axis = int(axis)
    if axis < 0:
        axis += rank
    return axis if 0 <= axis < rank else None


def norm_axes(axes: Sequence[int], rank: int) -> list[int] | None:
    """Normalized axes, or ``None`` when one is out of range or repeated."""
    out = [norm_axis(a, rank) for a in axes]
    if any(a is None for a in out) or len(set(out)) != len(out):
        return None
    return out  # type: ignore[return-value]


def int_list(x: np.ndarray | Sequence[int] | None) -> list[int] | None:
    """A 1-D int tensor (or list) as a Python list."""
    if x is None:
        return None
    a = np.asarray(x).reshape(-1)
    if a.dtype.kind == "f" and a.size and not (np.isfinite(a).all() and np.abs(a).max() < 2.0**63):
        raise ValueError(f"expected integer values, got {a[~np.isfinite(a) | (np.abs(a) >= 2.0**63)][0]}")
    if a.dtype.kind not in "biuf":
        raise ValueError(f"expected an integer tensor, got element type {a.dtype}")
    return [int(v) for v in a]
