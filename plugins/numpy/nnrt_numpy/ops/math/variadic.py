"""Sum, Mean, Max, Min: elementwise over any number of broadcast inputs."""
from __future__ import annotations

from functools import reduce
from typing import Callable, ClassVar

import numpy as np

from ...kernel import Kernel, register


class _Variadic(Kernel):
    fn: ClassVar[Callable]

    def __call__(self, *xs: np.ndarray) -> tuple[np.ndarray]:
        if not xs:
            raise self.fail("needs at least one input")
        if len(xs) == 1:
            return (xs[0].copy(),)
        try:
            y = reduce(type(self).fn, xs)
        except ValueError:
            raise self.fail(f"input shapes {[x.shape for x in xs]} are not broadcastable") from None
        return (self.finish(y, len(xs)),)

    def finish(self, y: np.ndarray, n: int) -> np.ndarray:
        return y


def _max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum(a, b)


def _min(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.minimum(a, b)


@register
class Sum(_Variadic):
    op_type = "Sum"
    since_version = 1
    fn = staticmethod(np.add)


@register
class Mean(_Variadic):
    op_type = "Mean"
    since_version = 1
    fn = staticmethod(np.add)

    def finish(self, y: np.ndarray, n: int) -> np.ndarray:
        return (y / y.dtype.type(n)).astype(y.dtype, copy=False) if y.dtype.kind == "f" else y // n


@register
class Max(_Variadic):
    op_type = "Max"
    since_version = 1
    fn = staticmethod(_max)


@register
class Min(_Variadic):
    op_type = "Min"
    since_version = 1
    fn = staticmethod(_min)
