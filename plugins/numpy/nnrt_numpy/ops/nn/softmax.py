"""Softmax, LogSoftmax and Hardmax.

Before opset 13 these ops flatten the input to 2-D at ``axis`` (default 1) and
normalize each row; from opset 13 they normalize along the single ``axis``
(default -1).
"""
from __future__ import annotations

import math

import numpy as np

from ... import parallel
from ...kernel import Kernel, NodeInfo, register


def softmax(x: np.ndarray, axis: int, out: np.ndarray | None = None) -> np.ndarray:
    """Softmax along ``axis`` (into ``out`` when given: ``x``'s shape and dtype, may be ``x``).  A
    float32/float64 Softmax over its last axis takes :func:`softmax_rows` (in row pieces on the idle
    cores when its values are worth splitting, :func:`nnrt_numpy.parallel.split_threads`)."""
    if axis == x.ndim - 1 and x.ndim >= 2 and x.dtype in _FAST and x.size >= _FAST_FROM and x.flags.c_contiguous:
        rows = x.size // x.shape[-1]
        y = out if out is not None else np.empty(x.shape, x.dtype)
        k = min(parallel.split_threads(parallel.work_us("softmax", x.size)), rows)
        softmax_rows(x.reshape(rows, -1), y.reshape(rows, -1), k)
        return y
    y = x - x.max(axis=axis, keepdims=True)
    np.exp(y, out=y)
    y /= y.sum(axis=axis, keepdims=True)
    if out is not None:
        np.copyto(out, y)
        return out
    return y


_FAST = (np.dtype(np.float32), np.dtype(np.float64))
#: smaller arrays keep the three-pass form (the row-wise form's extra calls cost more than they save)
_FAST_FROM = 2048
#: the unshifted form is taken when every value is at most this (exp stays far from overflow: a row
#: sum of up to 2^40 values below e^64 is finite in float32) ...
_UNSHIFTED_MAX = 64.0
#: ... and every row sum is at least this (no row lost to underflow: a value that underflows in
#: exp(x) is below 2^-126, so it is off by less than 2^-62 of its row sum)
_UNSHIFTED_MIN_SUM = 2.0 ** -64


def _rows(x2: np.ndarray, y2: np.ndarray, unshifted: bool) -> None:
    """Softmax of every row of the C-contiguous 2-D ``x2`` into ``y2``: ``exp(x) / sum`` when
    ``unshifted`` (``y2`` not sharing ``x2``'s memory; the rows whose sum comes out too small
    or not finite are redone shifted), else ``exp(x - max) / sum``.  Row sums are numpy's
    pairwise sums along each row: a row's values depend on that row alone, whatever piece it
    is in."""
    if unshifted:
        np.exp(x2, out=y2)
        s = np.add.reduce(y2, axis=1, keepdims=True)
        if s.min() >= _UNSHIFTED_MIN_SUM:
            np.divide(y2, s, out=y2)
            return
        with np.errstate(all="ignore"):  # (NaN compares False) some rows need the shift
            np.divide(y2, s, out=y2)
            bad = np.flatnonzero(~(s[:, 0] >= _UNSHIFTED_MIN_SUM))
            y2[bad] = _shifted(x2[bad])
        return
    np.subtract(x2, x2.max(axis=1, keepdims=True), out=y2)
    np.exp(y2, out=y2)
    np.divide(y2, np.add.reduce(y2, axis=1, keepdims=True), out=y2)


def _shifted(x2: np.ndarray) -> np.ndarray:
    """``exp(x - max) / sum`` of every row of ``x2`` (a fresh copy of rows: overwritten)."""
    np.subtract(x2, x2.max(axis=1, keepdims=True), out=x2)
    np.exp(x2, out=x2)
    return np.divide(x2, np.add.reduce(x2, axis=1, keepdims=True), out=x2)


def softmax_rows(x2: np.ndarray, y2: np.ndarray, k: int = 1) -> None:
    """Softmax of every row of the C-contiguous 2-D ``x2`` into ``y2`` (C-contiguous, may be
    ``x2``), in ``2 * k`` row pieces on ``k`` threads when ``k > 1`` (bit for bit the one-thread
    values).

    Softmax does not change when a row is shifted by a constant; the shift by the row max only
    keeps ``exp`` from overflowing.  So when no value of ``x2`` exceeds :data:`_UNSHIFTED_MAX`
    (one whole-array max, ~15x cheaper than the per-row max over short rows) ``exp(x)`` is
    summed directly, and only the rows whose sum comes out below :data:`_UNSHIFTED_MIN_SUM`
    (every value of the row very negative, e.g. a fully masked attention row) are redone in the
    classic ``exp(x - max)`` form; NaN or inf anywhere takes the classic form for the whole
    array, as does writing in place.  The unshifted values are as accurate (no rounding of
    ``x - max``)."""
    unshifted = bool(x2.size) and not np.may_share_memory(x2, y2) and x2.max() <= _UNSHIFTED_MAX
    if k <= 1:
        _rows(x2, y2, unshifted)
        return
    step = -(-x2.shape[0] // (2 * k))

    def piece(i: int) -> None:
        a, b = i * step, min(x2.shape[0], (i + 1) * step)
        _rows(x2[a:b], y2[a:b], unshifted)

    parallel.run_chunks(piece, -(-x2.shape[0] // step), k)


def log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    y = x - x.max(axis=axis, keepdims=True)
    y -= np.log(np.exp(y).sum(axis=axis, keepdims=True))
    return y


def hardmax(x: np.ndarray, axis: int) -> np.ndarray:
    arg = np.expand_dims(x.argmax(axis=axis), axis)
    y = np.zeros_like(x)
    np.put_along_axis(y, arg, 1, axis=axis)
    return y


class _Normalize(Kernel):
    fn = staticmethod(softmax)
    default_axis = 1
    flatten = True

    def _setup(self, node: NodeInfo) -> None:
        self.axis = int(node.attr("axis", self.default_axis))

    def _axis(self, x: np.ndarray) -> int:
        r = max(x.ndim, 1)
        if not -r <= self.axis < r + (1 if self.flatten else 0):
            raise self.fail(f"axis {self.axis} out of range for rank {x.ndim}")
        return self.axis + r if self.axis < 0 else self.axis

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        axis = self._axis(x)
        if x.size == 0 or x.ndim == 0:
            return (self.fn(x.reshape(1, -1), 1).reshape(x.shape) if x.ndim == 0 else x.copy(),)
        if self.flatten:
            rows = math.prod(x.shape[:axis])
            return (self.fn(x.reshape(rows, -1), 1).reshape(x.shape),)
        return (self.fn(x, axis),)


def _versions(name: str, fn) -> None:
    old = type(name, (_Normalize,), {"op_type": name, "since_version": 1, "fn": staticmethod(fn),
                                      "__doc__": f"{name}-1/11: flatten to 2-D at axis."})
    new = type(name + "13", (_Normalize,), {"op_type": name, "since_version": 13, "fn": staticmethod(fn),
                                            "default_axis": -1, "flatten": False,
                                            "__doc__": f"{name}-13: normalize along axis."})
    register(old)
    register(new)


_versions("Softmax", softmax)
_versions("LogSoftmax", log_softmax)
_versions("Hardmax", hardmax)
