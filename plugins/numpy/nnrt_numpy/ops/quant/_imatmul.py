"""Exact integer matrix products through float64 BLAS, and the per-row /
per-column parameter layouts of the quantized MatMul operators."""
from __future__ import annotations

from typing import Callable

import numpy as np

# Products of 8/16-bit operands summed over K stay exact in float64 while
# |sum| < 2**53, i.e. for any realistic K; fall back to int64 beyond that.
_EXACT = float(2**53)


def int_matmul(a: np.ndarray, b: np.ndarray, fail: Callable[[str], Exception]) -> np.ndarray:
    """``a @ b`` for integer arrays, returned as int64."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise fail(f"matmul inner dimensions differ: {a.shape} @ {b.shape}")
    k = a2.shape[-1]
    amax = float(np.abs(a2).max(initial=0))
    bmax = float(np.abs(b2).max(initial=0))
    try:
        np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    except ValueError:
        raise fail(f"matmul batch dimensions do not broadcast: {a.shape} @ {b.shape}") from None
    if amax * bmax * max(k, 1) < _EXACT:
        out = np.rint(np.matmul(a2.astype(np.float64), b2.astype(np.float64))).astype(np.int64)
    else:
        out = np.matmul(a2.astype(np.int64), b2.astype(np.int64))
    if a.ndim == 1:
        out = out[..., 0, :]
    if b.ndim == 1:
        out = out[..., 0]
    return out


def row_param(p: np.ndarray, a: np.ndarray, fail: Callable[[str], Exception], name: str) -> np.ndarray:
    """A scalar or per-row parameter of the left operand, shaped to broadcast."""
    p = np.asarray(p)
    if p.size == 1:
        return p.reshape(())
    if a.ndim >= 2 and p.ndim == 1 and p.shape[0] == a.shape[-2]:
        return p.reshape(-1, 1)
    if a.ndim >= 2 and p.ndim == a.ndim and p.shape[-1] == 1 and p.shape[-2] == a.shape[-2]:
        return p
    raise fail(f"{name} of shape {p.shape} is neither a scalar nor per-row for input of shape {a.shape}")


def col_param(p: np.ndarray, b: np.ndarray, fail: Callable[[str], Exception], name: str) -> np.ndarray:
    """A scalar or per-column parameter of the right operand, shaped to broadcast."""
    p = np.asarray(p)
    if p.size == 1:
        return p.reshape(())
    if b.ndim >= 2 and p.ndim == 1 and p.shape[0] == b.shape[-1]:
        return p
    if b.ndim >= 2 and p.ndim == b.ndim and p.shape[-2] == 1 and p.shape[-1] == b.shape[-1]:
        return p
    raise fail(f"{name} of shape {p.shape} is neither a scalar nor per-column for input of shape {b.shape}")
