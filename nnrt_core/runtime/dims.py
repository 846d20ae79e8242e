"""Shape tests decided at build: the feed and output checks compare a run's
array shapes with the declared dimensions through a few C-level compares
(a tuple compare for a static shape, an ``operator.itemgetter`` over the fixed
dimensions otherwise) instead of a Python loop per dimension."""
from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, Sequence

__all__ = ["ShapeTest", "shape_test", "passes"]

#: (rank or None, the whole shape when static, getter of the fixed dims or None, their values)
ShapeTest = tuple["int | None", "tuple[int, ...] | None", "Callable[[tuple[int, ...]], Any] | None", Any]


def shape_test(declared: Sequence[Any] | None) -> ShapeTest:
    """The precomputed test of ``declared`` (ints are fixed, anything else free;
    ``None``: the rank is unknown too, every shape passes)."""
    if declared is None:
        return None, None, None, None
    fixed = [(i, d) for i, d in enumerate(declared) if isinstance(d, int)]
    if len(fixed) == len(declared):
        return len(declared), tuple(declared), None, None
    if not fixed:
        return len(declared), None, None, None
    getter = itemgetter(*(i for i, _ in fixed))
    want = fixed[0][1] if len(fixed) == 1 else tuple(d for _, d in fixed)  # what itemgetter returns
    return len(declared), None, getter, want


def passes(test: ShapeTest, shape: tuple[int, ...]) -> bool:
    """Whether ``shape`` passes ``test`` (the checks inline this; kept for tools and tests)."""
    ndim, static, getter, want = test
    if static is not None:
        return shape == static
    if ndim is None:
        return True
    return len(shape) == ndim and (getter is None or getter(shape) == want)
