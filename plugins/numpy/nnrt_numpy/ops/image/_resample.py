"""Separable 1-D resampling used by Resize and Upsample.

Every supported interpolation (nearest, n-linear, n-cubic, with or without
antialiasing) is separable, so an N-D resize is a sequence of 1-D resizes.
Along one axis each output position ``i`` reads a small set of input taps
``idx[i, :]`` with weights ``w[i, :]``; taps outside the input are clamped to
the edge (or dropped and the weights renormalized with ``exclude_outside``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["COORD_MODES", "attr_text", "source_coords", "nearest_taps", "filter_taps", "apply_taps"]

COORD_MODES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_half_pixel_for_nn",
    "tf_crop_and_resize",
)


def attr_text(v: Any) -> str:
    """A string attribute as ``str`` (ONNX attributes may arrive as bytes)."""
    return v.decode() if isinstance(v, bytes) else str(v)


def source_coords(
    mode: str,
    out_len: int,
    in_len: int,
    scale: float,
    roi: tuple[float, float] = (0.0, 1.0),
) -> tuple[np.ndarray, np.ndarray | None]:
    """Map output indices to (fractional) input coordinates.

    ``scale`` is the axis scale factor; ``scale * in_len`` is the possibly
    fractional target length the ONNX formulas call ``output_width``.
    Returns the coordinates and, for ``tf_crop_and_resize``, the mask of
    positions that fall outside the input (to be filled with the
    extrapolation value)."""
    y = np.arange(out_len, dtype=np.float64)
    out_w = scale * in_len
    mask = None
    if mode == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    elif mode == "half_pixel_symmetric":
        adjustment = out_len / out_w
        offset = in_len / 2 * (1 - adjustment)
        x = offset + (y + 0.5) / scale - 0.5
    elif mode == "pytorch_half_pixel":
        x = (y + 0.5) / scale - 0.5 if out_len > 1 else np.zeros_like(y)
    elif mode == "align_corners":
        x = y * (in_len - 1) / (out_w - 1) if out_w != 1 else np.zeros_like(y)
    elif mode == "asymmetric":
        x = y / scale
    elif mode == "tf_half_pixel_for_nn":
        x = (y + 0.5) / scale
    elif mode == "tf_crop_and_resize":
        start, end = roi
        if out_w != 1:
            x = start * (in_len - 1) + y * (end - start) * (in_len - 1) / (out_w - 1)
        else:
            x = np.full_like(y, 0.5 * (start + end) * (in_len - 1))
        mask = (x < 0) | (x > in_len - 1)
    else:  # pragma: no cover - validated by the kernels
        raise ValueError(mode)
    return x, mask


def nearest_taps(x: np.ndarray, in_len: int, nearest_mode: str, downsampling: bool = False) -> np.ndarray:
    """Input index of the nearest pixel for each coordinate, clamped to the input.

    ``nearest_mode='simple'`` is the pre-opset-11 rule: truncate when
    upsampling, round up when downsampling."""
    fl = np.floor(x)
    frac = x - fl
    if nearest_mode == "round_prefer_floor":
        idx = np.where(frac > 0.5, fl + 1, fl)
    elif nearest_mode == "round_prefer_ceil":
        idx = np.where(frac >= 0.5, fl + 1, fl)
    elif nearest_mode == "floor":
        idx = fl
    elif nearest_mode == "ceil":
        idx = np.ceil(x)
    elif nearest_mode == "simple":
        idx = np.ceil(x) if downsampling else np.trunc(x)
    else:  # pragma: no cover
        raise ValueError(nearest_mode)
    return np.clip(idx, 0, in_len - 1).astype(np.intp)


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    t = np.abs(t)
    t2 = t * t
    t3 = t2 * t
    near = (a + 2) * t3 - (a + 3) * t2 + 1
    far = a * t3 - 5 * a * t2 + 8 * a * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def filter_taps(
    x: np.ndarray,
    in_len: int,
    mode: str,
    scale: float,
    cubic_a: float = -0.75,
    antialias: bool = False,
    exclude_outside: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Taps and weights of linear / cubic interpolation at coordinates ``x``.

    With ``antialias`` and ``scale < 1`` the filter is stretched by
    ``1 / scale`` (its support grows, its weights are renormalized)."""
    radius = 1 if mode == "linear" else 2
    s = min(scale, 1.0) if antialias else 1.0
    start = int(np.floor(-radius / s)) + 1
    n = 2 - 2 * start
    fl = np.floor(x)
    idx = fl[:, None] + np.arange(start, start + n)[None, :]
    t = (idx - x[:, None]) * s
    if mode == "linear":
        w = np.clip(1 - np.abs(t), 0, 1)
    else:
        w = _cubic(t, cubic_a)
    if exclude_outside:
        w = np.where((idx < 0) | (idx > in_len - 1), 0.0, w)
    if antialias or exclude_outside:
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    return np.clip(idx, 0, in_len - 1).astype(np.intp), w


def apply_taps(data: np.ndarray, axis: int, idx: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """``out[..., i, ...] = sum_k w[i, k] * data[..., idx[i, k], ...]`` along ``axis``."""
    if w is None:
        return np.take(data, idx, axis=axis)
    shape = [1] * data.ndim
    shape[axis] = idx.shape[0]
    w = w.astype(data.dtype, copy=False)
    out = None
    for k in range(idx.shape[1]):
        wk = w[:, k]
        if not wk.any():
            continue
        term = np.take(data, idx[:, k], axis=axis) * wk.reshape(shape)
        out = term if out is None else out + term
    if out is None:
        shape_out = list(data.shape)
        shape_out[axis] = idx.shape[0]
        out = np.zeros(shape_out, dtype=data.dtype)
    return out
