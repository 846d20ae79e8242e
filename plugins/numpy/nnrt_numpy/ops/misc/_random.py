"""Random generator handling shared by the random kernels: a generator seeded
from the ``seed`` attribute when present (reproducible sequence across runs of
one compiled model), otherwise from fresh OS entropy."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo

from ..quant._common import dtype_from_attr


def make_rng(node: NodeInfo) -> np.random.Generator:
    seed = node.attr("seed")
    if seed is None:
        return np.random.default_rng()
    # the attribute is a float; use its bit pattern so 0.5 and 0.7 differ
    return np.random.default_rng(int(np.float32(seed).view(np.uint32)))


def float_dtype(code: int | None, default: np.dtype, fail) -> np.dtype:
    dt = default if code is None else dtype_from_attr(int(code))
    dt = np.dtype(dt)
    if dt.kind != "f" and str(dt) != "bfloat16":
        raise fail(f"dtype must be a floating type, got {dt}")
    return dt


class _Sampler(Kernel):
    """A random kernel: ``_params`` reads the distribution's attributes at
    compile time, ``_draw(shape)`` samples it."""

    def _params(self, node: NodeInfo) -> None:
        raise NotImplementedError

    def _draw(self, shape: tuple[int, ...]) -> np.ndarray:
        raise NotImplementedError


class RandomFromShape(_Sampler):
    """Random{Normal,Uniform}: samples of the ``shape`` attribute's shape."""

    def _setup(self, node: NodeInfo) -> None:
        shape = node.attr("shape")
        if shape is None:
            raise self.fail("the 'shape' attribute is required")
        self.shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in self.shape):
            raise self.fail(f"shape must be non-negative, got {list(self.shape)}")
        self.dtype = float_dtype(node.attr("dtype"), np.dtype(np.float32), self.fail)
        self._params(node)
        self.rng = make_rng(node)

    def __call__(self) -> Sequence[Any]:
        return (self._draw(self.shape).astype(self.dtype),)


class RandomLike(_Sampler):
    """Random{Normal,Uniform}Like: samples of the input's shape, in the
    ``dtype`` attribute's type or else the input's (which must be floating)."""

    def _setup(self, node: NodeInfo) -> None:
        code = node.attr("dtype")
        self.dtype = None if code is None else float_dtype(code, np.dtype(np.float32), self.fail)
        self._params(node)
        self.rng = make_rng(node)

    def __call__(self, x) -> Sequence[Any]:
        x = np.asarray(x)
        dt = self.dtype if self.dtype is not None else x.dtype
        if np.dtype(dt).kind != "f" and str(dt) != "bfloat16":
            raise self.fail(f"output type {dt} is not floating; set the dtype attribute")
        return (self._draw(x.shape).astype(dt),)
