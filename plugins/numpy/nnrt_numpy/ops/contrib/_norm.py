"""Layer normalization arithmetic shared by the fused normalization kernels."""
from __future__ import annotations

import numpy as np


def comp_dtype(dt: np.dtype) -> type:
    return np.float64 if np.dtype(dt) == np.float64 else np.float32


def layer_norm(x: np.ndarray, axis: int, eps: float, simplified: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Normalize over axes ``axis..`` of ``x`` (already in the compute type).

    Returns ``(normalized, mean, inv_std)``; ``mean`` is zeros when
    ``simplified`` (RMS norm)."""
    axes = tuple(range(axis, x.ndim))
    if simplified:
        mean = np.zeros(x.shape[:axis] + (1,) * len(axes), dtype=x.dtype)
        ms = np.mean(x * x, axis=axes, keepdims=True)
        inv = 1.0 / np.sqrt(ms + np.asarray(eps, dtype=x.dtype))
        return x * inv, mean, inv
    mean = np.mean(x, axis=axes, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    inv = 1.0 / np.sqrt(var + np.asarray(eps, dtype=x.dtype))
    return d * inv, mean, inv
