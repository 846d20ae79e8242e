"""Base class for elementwise binary kernels.

Opsets before 7 did not broadcast numpy-style: the second input was
broadcast onto the first only when ``broadcast=1``, aligned at ``axis``
(default: trailing dims).  ``LegacyBinary`` implements that; ``Binary``
implements numpy (multidirectional) broadcasting.
"""
from __future__ import annotations

from typing import Callable, ClassVar

import numpy as np

from ...kernel import Kernel, NodeInfo
from ...limits import may_exceed


class Binary(Kernel):
    """``y = fn(a, b)`` with numpy broadcasting."""

    fn: ClassVar[Callable[[np.ndarray, np.ndarray], np.ndarray]]

    def __call__(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
        try:
            if a.shape != b.shape and may_exceed(a, b):  # e.g. [n, 1] + [1, m]: check before numpy allocates
                self.check_alloc(np.broadcast_shapes(a.shape, b.shape), a.dtype)
            return (self.compute(a, b),)  # IEEE results: the program runs with numpy's FP errors off
        except ValueError as e:
            if "broadcast" in str(e):
                raise self.fail(f"shapes {a.shape} and {b.shape} are not broadcastable") from None
            raise

    def compute(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return type(self).fn(a, b)


class LegacyBinary(Binary):
    """Opset < 7 semantics: ``broadcast``/``axis`` attributes."""

    def _setup(self, node: NodeInfo) -> None:
        self.broadcast = bool(node.attr("broadcast", 0))
        self.axis = node.attr("axis")

    def __call__(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
        if a.shape != b.shape:
            if not self.broadcast:
                raise self.fail(f"shapes {a.shape} and {b.shape} differ and broadcast=0")
            axis = a.ndim - b.ndim if self.axis is None else int(self.axis)
            if axis < 0:
                axis += a.ndim
            if axis < 0 or axis + b.ndim > a.ndim or any(
                db not in (1, a.shape[axis + i]) for i, db in enumerate(b.shape)
            ):
                raise self.fail(f"cannot broadcast {b.shape} onto {a.shape} at axis {axis}")
            b = b.reshape(b.shape + (1,) * (a.ndim - axis - b.ndim))
        return super().__call__(a, b)


def make_binary(name: str, fn: Callable, versions: tuple[int, ...], legacy_before: int = 7,
                doc: str = "", namespace: dict | None = None) -> list[type[Kernel]]:
    """Create one kernel class per version in ``versions`` (all sharing ``fn``)."""
    classes = []
    for v in versions:
        base = LegacyBinary if v < legacy_before else Binary
        cls = type(f"{name}_{v}", (base,), {
            "op_type": name, "since_version": v, "fn": staticmethod(fn),
            "__doc__": doc or f"{name}-{v}",
        })
        classes.append(cls)
    return classes
