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


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    """Softmax along ``axis``; a float Softmax over its last axis runs in row pieces on the idle cores
    when its values are worth splitting (:func:`nnrt_numpy.parallel.split_threads`)."""
    if axis == x.ndim - 1 and x.ndim >= 2 and x.dtype.kind == "f" and x.size:
        rows = x.size // x.shape[-1]
        k = min(parallel.split_threads(parallel.work_us("softmax", x.size)), rows)
        if k > 1:
            return _softmax_rows(x.reshape(rows, -1), k).reshape(x.shape)
    y = x - x.max(axis=axis, keepdims=True)
    np.exp(y, out=y)
    y /= y.sum(axis=axis, keepdims=True)
    return y


def _softmax_rows(x2: np.ndarray, k: int) -> np.ndarray:
    """Softmax of every row of the 2-D ``x2``, in ``2 * k`` row pieces on ``k`` threads (the same
    operations per row as the whole-array form: the values do not depend on the pieces)."""
    y = np.empty(x2.shape, x2.dtype)
    step = -(-x2.shape[0] // (2 * k))

    def piece(i: int) -> None:
        a, b = i * step, min(x2.shape[0], (i + 1) * step)
        yp = y[a:b]
        np.subtract(x2[a:b], x2[a:b].max(axis=1, keepdims=True), out=yp)
        np.exp(yp, out=yp)
        yp /= yp.sum(axis=1, keepdims=True)

    parallel.run_chunks(piece, -(-x2.shape[0] // step), k)
    return y


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
