"""Attribute-free elementwise unary ops, generated from a table.

``Erf`` uses :func:`nnrt_numpy.fast_erf.erf_float32` for float32 and
float16 input (a rational approximation, a few ulps off; SciPy is not
imported) and ``scipy.special.erf`` for float64.  Results keep the input dtype.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from nnrt_numpy import special
from nnrt_numpy.fast_erf import erf_float32

from ...kernel import Kernel, NodeInfo, register

_FAST_ERF = (np.dtype(np.float32), np.dtype(np.float16))


def _reciprocal(x: np.ndarray) -> np.ndarray:
    return np.reciprocal(x) if x.dtype.kind == "f" else np.divide(1, x).astype(x.dtype)


def _erf(x: np.ndarray) -> np.ndarray:
    if x.dtype in _FAST_ERF:
        return erf_float32(x)
    return special.erf(x).astype(x.dtype, copy=False)


def _same_dtype(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    def wrapped(x: np.ndarray) -> np.ndarray:
        return np.asarray(fn(x)).astype(x.dtype, copy=False)
    return wrapped


#: op name -> (function, since_version)
TABLE: dict[str, tuple[Callable[[np.ndarray], np.ndarray], int]] = {
    "Abs": (np.abs, 1),
    "Neg": (np.negative, 1),
    "Exp": (np.exp, 1),
    "Log": (np.log, 1),
    "Sqrt": (np.sqrt, 1),
    "Reciprocal": (_reciprocal, 1),
    "Floor": (np.floor, 1),
    "Ceil": (np.ceil, 1),
    "Round": (np.round, 11),  # round half to even, like ONNX
    "Sign": (_same_dtype(np.sign), 9),
    "Erf": (_erf, 9),
    "Sin": (np.sin, 7),
    "Cos": (np.cos, 7),
    "Tan": (np.tan, 7),
    "Asin": (np.arcsin, 7),
    "Acos": (np.arccos, 7),
    "Atan": (np.arctan, 7),
    "Sinh": (np.sinh, 9),
    "Cosh": (np.cosh, 9),
    "Asinh": (np.arcsinh, 9),
    "Acosh": (np.arccosh, 9),
    "Atanh": (np.arctanh, 9),
    "IsNaN": (np.isnan, 9),
    "Not": (np.logical_not, 1),
    "BitwiseNot": (np.invert, 18),
}


class Unary(Kernel):
    """``y = fn(x)``; log(0), sqrt(-1)... give IEEE results without warnings
    (programs run with numpy's floating-point errors off, see :mod:`nnrt_numpy.ieee`)."""

    fn: Callable[[np.ndarray], np.ndarray]

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        return (type(self).fn(x),)


class _ErfBase(Unary):
    """Imports SciPy at compile unless the input is known to be float32 / float16."""

    def _setup(self, node: NodeInfo) -> None:
        dt = node.input_dtypes[0] if node.input_dtypes else None
        if dt is None or np.dtype(dt) not in _FAST_ERF:
            special.load()


for _name, (_fn, _since) in TABLE.items():
    register(type(_name, (_ErfBase if _fn is _erf else Unary,), {
        "op_type": _name, "since_version": _since, "fn": staticmethod(_fn),
        "__doc__": f"{_name}: elementwise {getattr(_fn, '__name__', _name)}."}))


@register
class IsInf(Kernel):
    """IsInf with ``detect_positive``/``detect_negative``."""

    op_type = "IsInf"
    since_version = 10

    def _setup(self, node) -> None:
        self.pos = bool(node.attr("detect_positive", 1))
        self.neg = bool(node.attr("detect_negative", 1))

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        if self.pos and self.neg:
            return (np.isinf(x),)
        if self.pos:
            return (np.isposinf(x),)
        if self.neg:
            return (np.isneginf(x),)
        return (np.zeros(x.shape, dtype=bool),)
