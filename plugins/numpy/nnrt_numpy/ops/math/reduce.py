"""Reduce* ops.  ``axes`` is an attribute up to opset 12 (ReduceSum) / 17 (the
others) and an optional input afterwards, where ``noop_with_empty_axes=1``
turns an empty axes list into the identity.  Reducing an empty set gives the
operation's identity (0 for sums, 1 for products, -inf/+inf (or the dtype's
min/max) for max/min, -inf for the log-sums, NaN for the mean).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ...kernel import Kernel, NodeInfo, register


def _extreme(dtype: np.dtype, low: bool):
    if dtype.kind == "f":
        return dtype.type(-np.inf if low else np.inf)
    if dtype.kind == "b":
        return not low
    info = np.iinfo(dtype)
    return info.min if low else info.max


def _max(x, axes, keep):
    return np.max(x, axis=axes, keepdims=keep, initial=_extreme(x.dtype, True)) if x.size == 0 else \
        np.max(x, axis=axes, keepdims=keep)


def _min(x, axes, keep):
    return np.min(x, axis=axes, keepdims=keep, initial=_extreme(x.dtype, False)) if x.size == 0 else \
        np.min(x, axis=axes, keepdims=keep)


def _sum(x, axes, keep):
    return np.sum(x, axis=axes, keepdims=keep, dtype=x.dtype)


def _mean(x, axes, keep):
    if x.dtype.kind in "iu":  # integer mean: floor of sum / count
        count = x.size if axes is None else int(np.prod([x.shape[a] for a in axes]))
        return np.sum(x, axis=axes, keepdims=keep) // max(count, 1)
    return np.mean(x, axis=axes, keepdims=keep, dtype=x.dtype)


def _prod(x, axes, keep):
    return np.prod(x, axis=axes, keepdims=keep, dtype=x.dtype)


def _l1(x, axes, keep):
    return np.sum(np.abs(x), axis=axes, keepdims=keep, dtype=x.dtype)


def _l2(x, axes, keep):
    s = np.sum(np.square(x.astype(np.float64) if x.dtype.kind in "iu" else x), axis=axes, keepdims=keep)
    return np.sqrt(s).astype(x.dtype)


def _sum_square(x, axes, keep):
    return np.sum(np.square(x), axis=axes, keepdims=keep, dtype=x.dtype)


def _log_sum(x, axes, keep):
    return np.log(np.sum(x, axis=axes, keepdims=keep, dtype=x.dtype))


def _log_sum_exp(x, axes, keep):
    if x.size == 0:
        return np.log(np.sum(np.exp(x), axis=axes, keepdims=keep, dtype=x.dtype))
    m = np.max(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0).astype(x.dtype)
    s = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True, dtype=x.dtype)) + m
    return s if keep else np.squeeze(s, axis=axes)


#: op -> (function, opset where axes became an input, other versions)
TABLE: dict[str, tuple[Callable, int, tuple[int, ...]]] = {
    "ReduceSum": (_sum, 13, (1, 11)),
    "ReduceMean": (_mean, 18, (1, 11, 13)),
    "ReduceMax": (_max, 18, (1, 11, 12, 13, 20)),
    "ReduceMin": (_min, 18, (1, 11, 12, 13, 20)),
    "ReduceProd": (_prod, 18, (1, 11, 13)),
    "ReduceL1": (_l1, 18, (1, 11, 13)),
    "ReduceL2": (_l2, 18, (1, 11, 13)),
    "ReduceSumSquare": (_sum_square, 18, (1, 11, 13)),
    "ReduceLogSum": (_log_sum, 18, (1, 11, 13)),
    "ReduceLogSumExp": (_log_sum_exp, 18, (1, 11, 13)),
}


class Reduce(Kernel):
    """Shared axes/keepdims handling; ``axes_input`` selects the attribute or input form."""

    fn: Callable
    axes_input = False

    def _setup(self, node: NodeInfo) -> None:
        self.keepdims = bool(node.attr("keepdims", 1))
        self.noop = bool(node.attr("noop_with_empty_axes", 0))
        axes = node.attr("axes")
        self.axes = None if axes is None else [int(a) for a in axes]

    def __call__(self, x: np.ndarray, axes: np.ndarray | None = None) -> tuple[np.ndarray]:
        ax = [int(a) for a in axes.reshape(-1)] if self.axes_input and axes is not None else (
            None if self.axes_input else self.axes)
        if not ax:
            if self.noop and self.axes_input:
                return (x,)
            ax = list(range(x.ndim))
        r = x.ndim
        norm = []
        for a in ax:
            if not -max(r, 1) <= a < max(r, 1):
                raise self.fail(f"axis {a} out of range for rank {r}")
            norm.append(a % r if r else 0)
        if len(set(norm)) != len(norm):
            raise self.fail(f"axes {ax} contain duplicates")
        with np.errstate(all="ignore"):
            y = type(self).fn(x, tuple(norm) if r else None, self.keepdims)
        return (np.asarray(y).astype(x.dtype, copy=False),)


for _name, (_fn, _input_since, _old) in TABLE.items():
    for _v in sorted(set(_old) | {_input_since}):
        register(type(f"{_name}_{_v}", (Reduce,), {
            "op_type": _name, "since_version": _v, "fn": staticmethod(_fn),
            "axes_input": _v >= _input_since,
            "__doc__": f"{_name}-{_v}: axes as {'input' if _v >= _input_since else 'attribute'}.",
        }))
