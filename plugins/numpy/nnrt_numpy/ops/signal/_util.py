"""Helpers of the signal kernels: the ``[..., 1|2]`` real/complex layout and scalar inputs."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np


def to_complex(x: np.ndarray, fail: Callable[[str], Exception]) -> np.ndarray:
    """``[..., 1]`` (real) or ``[..., 2]`` (real, imag) -> complex array without the last axis."""
    if x.ndim < 1 or x.shape[-1] not in (1, 2):
        raise fail(f"the last dimension must be 1 (real) or 2 (complex), got shape {x.shape}")
    cdt = np.complex128 if x.dtype == np.float64 else np.complex64
    if x.shape[-1] == 1:
        return x[..., 0].astype(cdt)
    return (x[..., 0] + 1j * x[..., 1]).astype(cdt)


def from_complex(y: np.ndarray, dt: np.dtype) -> np.ndarray:
    """complex -> ``[..., 2]`` real array of type ``dt``."""
    return np.stack([y.real, y.imag], axis=-1).astype(dt)


def scalar_int(v: Any, fail: Callable[[str], Exception], name: str) -> int:
    a = np.asarray(v)
    if a.size != 1 or a.dtype.kind not in "iu":
        raise fail(f"{name} must be an integer scalar, got {a.dtype} of shape {a.shape}")
    return int(a.reshape(()))


def scalar_float(v: Any, fail: Callable[[str], Exception], name: str) -> float:
    a = np.asarray(v)
    if a.size != 1:
        raise fail(f"{name} must be a scalar, got shape {a.shape}")
    return float(a.reshape(()))
