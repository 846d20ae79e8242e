"""Attribute-free elementwise unary ops, generated from a table.

``Erf`` uses ``scipy.special.erf``.  Results keep the input dtype.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from nnrt_numpy import special

from ...kernel import Kernel, register


def _reciprocal(x: np.ndarray) -> np.ndarray:
    return np.reciprocal(x) if x.dtype.kind == "f" else np.divide(1, x).astype(x.dtype)


def _erf(x: np.ndarray) -> np.ndarray:
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


for _name, (_fn, _since) in TABLE.items():
    register(type(_name, (Unary,), {"op_type": _name, "since_version": _since, "fn": staticmethod(_fn),
                                    "uses_scipy": _fn is _erf,
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
