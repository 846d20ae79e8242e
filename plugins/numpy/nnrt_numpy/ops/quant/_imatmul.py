"""Exact integer matrix products through float64 BLAS (float32 BLAS in K chunks
for constant weights), and the per-row / per-column parameter layouts of the
quantized MatMul operators."""
from __future__ import annotations

from typing import Callable

import numpy as np

from nnrt_numpy import parallel

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


# -- constant integer weights: exact products through float32 BLAS ----------------------------------
# Integers below 2**24 are exact in float32, and so is every partial sum BLAS forms (in any order,
# any blocking) of a_mk * b_kn over a set of k while sum_k |a_mk| |b_kn| < 2**24. With |a| <= amax
# that holds when amax * sum_k |b_kn| < 2**24 for every column n: for 8-bit weights (mean |b| ~ 30)
# and 8-bit activations (|a - zp| <= 255), K up to ~2000 in one product. Longer products are cut
# along K (at multiples of 64 rows) into chunks that each satisfy it, one exact sgemm each, summed
# in float64 (exact below 2**53). sgemm runs about twice as fast as the float64 products of
# :func:`int_matmul`, and the weights are converted once, not at every run.
_F32_EXACT = float(2**24)
_BLOCK = 64  # rows of K per block of column sums (the chunk boundaries)


class IntWeights:
    """A constant integer right operand ``(K, N)`` with its zero point subtracted,
    kept as float32 (exact) for :func:`exact_product`, with the column sums of
    ``|b|`` per block of 64 rows that bound its partial sums."""

    __slots__ = ("f32", "k", "_blocks", "_chunks", "_f64")

    def __init__(self, b_minus_zp: np.ndarray) -> None:
        self.f32 = np.ascontiguousarray(b_minus_zp, dtype=np.float32)
        self.k = self.f32.shape[-2]
        rows = -(-self.k // _BLOCK) * _BLOCK
        padded = np.zeros((rows, self.f32.shape[-1]), np.float64)
        padded[: self.k] = np.abs(self.f32)
        self._blocks = padded.reshape(-1, _BLOCK, padded.shape[-1]).sum(axis=1)  # (blocks, N)
        self._chunks: dict[float, list[tuple[int, int]] | None] = {}
        self._f64: np.ndarray | None = None

    def f64(self) -> np.ndarray:
        if self._f64 is None:
            self._f64 = self.f32.astype(np.float64)
        return self._f64

    def chunks(self, a_absmax: float) -> list[tuple[int, int]] | None:
        """K ranges whose products with ``|a| <= a_absmax`` stay exact in float32,
        or None when one block of 64 rows is already too long (use float64)."""
        found = self._chunks.get(a_absmax, ())
        if found != ():
            return found  # type: ignore[return-value]
        limit = _F32_EXACT / a_absmax if a_absmax else np.inf
        out: list[tuple[int, int]] | None = []
        running = np.zeros(self._blocks.shape[-1])
        start = 0
        for i, block in enumerate(self._blocks):
            if float(block.max(initial=0)) >= limit:
                out = None
                break
            if i > start and float((running + block).max(initial=0)) >= limit:
                out.append((start * _BLOCK, i * _BLOCK))
                start, running = i, np.zeros_like(running)
            running += block
        if out is not None:
            out.append((start * _BLOCK, self.k))
        if len(self._chunks) < 1024:
            self._chunks[a_absmax] = out
        return out


def exact_product(a: np.ndarray, a_absmax: float, w: IntWeights) -> np.ndarray:
    """``a @ w`` exactly, for ``a`` (..., M, K) float32 holding integers of magnitude
    at most ``a_absmax``: float32 when no partial sum can reach 2**24, float64 otherwise."""
    chunks = w.chunks(a_absmax)
    if chunks is None:
        return parallel.matmul(a.astype(np.float64), w.f64())
    if len(chunks) == 1:
        return parallel.matmul(a, w.f32)
    total: np.ndarray | None = None
    for k0, k1 in chunks:
        part = parallel.matmul(np.ascontiguousarray(a[..., k0:k1]), w.f32[k0:k1])
        total = part.astype(np.float64) if total is None else np.add(total, part, out=total)
    assert total is not None
    return total


def const_weights(b: np.ndarray | None, zp: np.ndarray | None, zp_given: bool,
                  fail: Callable[[str], Exception]) -> IntWeights | None:
    """:class:`IntWeights` of a constant 2-D ``b`` minus its (scalar or per-column,
    constant or absent) zero point, or None when either is not constant."""
    if b is None or b.ndim != 2 or (zp_given and zp is None):
        return None
    bi = b.astype(np.int64)
    if zp is not None:
        bi = bi - col_param(zp, b, fail, "b_zero_point").astype(np.int64)
    return IntWeights(bi)


_RANGES: dict[np.dtype, tuple[float, float]] = {}


def range_absmax(dtype: np.dtype, zp: np.ndarray | float | None) -> float:
    """The largest ``|q - zp|`` over the integer range of ``dtype`` (zp scalar or per-row)."""
    bounds = _RANGES.get(dtype)
    if bounds is None:
        info = np.iinfo(dtype)
        bounds = _RANGES[np.dtype(dtype)] = (float(info.min), float(info.max))
    lo, hi = bounds
    if zp is None or np.size(zp) == 1:  # (the usual scalar: no array arithmetic)
        z = 0.0 if zp is None else float(np.asarray(zp).reshape(()))
        return max(abs(lo - z), abs(hi - z))
    z = np.asarray(zp, dtype=np.float64)
    return float(max(np.max(np.abs(lo - z)), np.max(np.abs(hi - z))))


def dequantized(acc: np.ndarray, scale: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """``float32(acc) * scale (+ bias)``, in place on ``acc`` when it is a float32
    result the caller owns and the shapes allow (the same roundings either way)."""
    y = acc if acc.dtype == np.float32 else acc.astype(np.float32)
    y = _in_place(np.multiply, y, np.asarray(scale, dtype=np.float32))
    if bias is not None:
        y = _in_place(np.add, y, np.asarray(bias, dtype=np.float32))
    return y


def _in_place(ufunc: np.ufunc, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    if np.broadcast_shapes(y.shape, x.shape) == y.shape:
        return ufunc(y, x, out=y)
    return ufunc(y, x)
