"""Helpers shared by the normalization kernels."""
from __future__ import annotations

import numpy as np


def stash_dtype(x: np.ndarray, stash_type: int) -> np.dtype:
    """Computation dtype: float32 (stash_type=1) unless the input is float64."""
    if x.dtype == np.float64:
        return np.dtype(np.float64)
    return np.dtype(np.float32) if stash_type == 1 else x.dtype


def normalize(x: np.ndarray, axes: tuple[int, ...], eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x - mean) / sqrt(var + eps)`` over ``axes``; also returns mean and 1/std (keepdims)."""
    mean = x.mean(axis=axes, keepdims=True)
    d = x - mean
    var = np.mean(np.square(d), axis=axes, keepdims=True)
    inv = 1 / np.sqrt(var + x.dtype.type(eps))
    d *= inv
    return d, mean, inv
