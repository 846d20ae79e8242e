"""Common attribute handling for the sliding-window pooling kernels."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...kernel import Kernel, NodeInfo
from ._spatial import resolve_pads, window_misfit


class PoolBase(Kernel):
    """Parses kernel_shape/strides/pads/dilations/auto_pad/ceil_mode and caches
    the per-input-shape geometry."""

    has_ceil_mode = True

    def _setup(self, node: NodeInfo) -> None:
        self.kernel = node.attr("kernel_shape")
        if self.kernel is None:
            raise self.fail("attribute kernel_shape is required")
        self.kernel = [int(k) for k in self.kernel]
        if any(k < 1 for k in self.kernel):
            raise self.fail("kernel_shape entries must be >= 1")
        nd = len(self.kernel)
        self.strides = [int(s) for s in node.attr("strides", [1] * nd)] or [1] * nd
        self.dilations = [int(d) for d in node.attr("dilations", [1] * nd)] or [1] * nd
        self.pads = node.attr("pads")
        self.auto_pad = node.attr("auto_pad", "NOTSET")
        self.ceil_mode = bool(node.attr("ceil_mode", 0))
        if len(self.strides) != nd or len(self.dilations) != nd:
            raise self.fail("strides and dilations need one entry per spatial axis")
        if self.pads is not None and len(self.pads) != 2 * nd:
            raise self.fail("pads needs two entries per spatial axis")
        if self.auto_pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
            raise self.fail(f"unknown auto_pad {self.auto_pad!r}")
        if self.pads is not None and any(p < 0 for p in self.pads):
            raise self.fail("pads must be non-negative")
        if self.pads is not None and any(p >= (k - 1) * d + 1 for p, k, d in zip(self.pads, self.kernel * 2, self.dilations * 2)):
            raise self.fail("pads must be smaller than the kernel")
        self._geo: dict[tuple, Any] = {}
        self._setup_pool(node)
        x = node.shape(0)
        if x is not None and all(isinstance(d, int) for d in x):  # static: refuse a bad window at build
            self.geometry(tuple(x))

    def _setup_pool(self, node: NodeInfo) -> None:
        """Hook for op-specific attributes."""

    def geometry(self, shape: tuple) -> tuple[list[int], list[int], list[int], list[int]]:
        """``(begin, end, out, extra)`` pads/output size for an input of ``shape``."""
        geo = self._geo.get(shape)
        if geo is None:
            nd = len(self.kernel)
            if len(shape) != nd + 2:
                raise self.fail(f"input of rank {len(shape)} has {len(shape) - 2} spatial axes but kernel_shape "
                                f"has {nd} entries")
            geo = resolve_pads(self.auto_pad, shape[2:], self.kernel, self.strides, self.dilations,
                               self.pads, self.ceil_mode)
            self._check_window(shape[2:], geo[0], geo[1])
            padded = (*shape[:2], *(n + b + e for n, b, e in zip(shape[2:], geo[0], geo[1])))
            self.check_alloc(padded, self.node.dtype(0) or np.float32, "padded input")  # SAME pads of a huge window
            self._geo[shape] = geo
        return geo


    def _check_window(self, spatial: tuple, begin: list[int], end: list[int]) -> None:
        """Refused before any work, whatever the window's size (see :func:`window_misfit`)."""
        misfit = window_misfit(spatial, self.kernel, self.dilations, begin, end)
        if misfit is not None:
            raise self.fail(misfit)


def lowest(dtype: np.dtype) -> Any:
    """The identity of max over ``dtype``."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return -np.inf
    return np.iinfo(dtype).min


def is_same_pool_2d(k: PoolBase, x: np.ndarray, out, extra) -> bool:
    """Stride 1, dilation 1, 2-D, output as large as the input (see same_pool_2d)."""
    return (len(k.kernel) == 2 and max(k.strides) == 1 and max(k.dilations) == 1 and not any(extra)
            and tuple(out) == x.shape[2:] and x.dtype.kind == "f")
