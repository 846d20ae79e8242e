"""AveragePool (all versions): pads, ceil_mode, count_include_pad, dilations."""
from __future__ import annotations

import numpy as np

from ...kernel import NodeInfo, register
from ._pool import PoolBase, is_same_pool_2d
from ._spatial import pad_spatial, pooled_reduce, same_pool_2d, window_reduce


@register
class AveragePool(PoolBase):
    op_type = "AveragePool"
    since_version = 1

    def _setup_pool(self, node: NodeInfo) -> None:
        self.count_include_pad = bool(node.attr("count_include_pad", 0))
        self._div: dict[tuple, np.ndarray] = {}

    def _divisor(self, shape: tuple, dtype: np.dtype) -> np.ndarray:
        key = (shape[2:], dtype)
        d = self._div.get(key)
        if d is None:
            begin, end, out, extra = self.geometry(shape)
            ones = np.ones(shape[2:], dtype=dtype)
            if self.count_include_pad:
                mask = pad_spatial(pad_spatial(ones, begin, end, 1), [0] * len(begin), extra, 0)
            else:
                mask = pad_spatial(ones, begin, [e + x for e, x in zip(end, extra)], 0)
            d = self._sum_taps(mask, out)
            d[d == 0] = 1
            self._div[key] = d
        return d

    def _sum_taps(self, xp: np.ndarray, out) -> np.ndarray:
        return window_reduce(xp, self.kernel, self.strides, self.dilations, out, np.add)

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        begin, end, out, extra = self.geometry(x.shape)
        y = same_pool_2d(x, self.kernel, begin, np.add) if is_same_pool_2d(self, x, out, extra) else None
        if y is not None:  # stride 1, output as large as the input: flat passes, no padded copy
            pass
        elif min(self.strides) > 1 or not any(begin):  # strided: no padded copy (same sums, same order)
            y = pooled_reduce(x, self.kernel, self.strides, self.dilations, begin, out, np.add, 0)
        else:  # stride 1 with padding: full-width ops on the padded copy are faster
            xp = pad_spatial(x, begin, [e + x_ for e, x_ in zip(end, extra)], 0)
            y = self._sum_taps(xp, out)
        y /= self._divisor(x.shape, x.dtype)
        return (y,)
