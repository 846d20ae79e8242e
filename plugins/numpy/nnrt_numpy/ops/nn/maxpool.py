"""MaxPool (all versions): N-d max pooling with pads, ceil_mode, dilations and
the optional ``Indices`` output (row- or column-major, per ``storage_order``)."""
from __future__ import annotations

import numpy as np

from ...kernel import NodeInfo, register
from ._pool import PoolBase, is_same_pool_2d, lowest
from ._spatial import pad_spatial, pooled_reduce, same_pool_2d, window_reduce, window_view


@register
class MaxPool(PoolBase):
    op_type = "MaxPool"
    since_version = 1

    def _setup_pool(self, node: NodeInfo) -> None:
        self.storage_order = int(node.attr("storage_order", 0))
        if self.storage_order not in (0, 1):
            raise self.fail("storage_order must be 0 or 1")
        self.want_indices = node.num_outputs > 1

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, ...]:
        begin, end, out, extra = self.geometry(x.shape)
        if not self.want_indices and is_same_pool_2d(self, x, out, extra):
            y = same_pool_2d(x, self.kernel, begin, np.maximum)
            if y is not None:
                return (y,)
        if not self.want_indices and (min(self.strides) > 1 or not any(begin)):
            # strided windows: reduce the taps that hit the input, no padded copy
            return (pooled_reduce(x, self.kernel, self.strides, self.dilations, begin, out, np.maximum,
                                  lowest(x.dtype)),)
        xp = pad_spatial(x, begin, [e + x_ for e, x_ in zip(end, extra)], lowest(x.dtype))
        if not self.want_indices:  # stride 1 with padding: full-width ops on the padded copy are faster
            return (window_reduce(xp, self.kernel, self.strides, self.dilations, out, np.maximum),)
        return self._with_indices(x, xp, begin, out)

    def _with_indices(self, x, xp, begin, out) -> tuple[np.ndarray, np.ndarray]:
        nd = len(self.kernel)
        n, c = x.shape[:2]
        win = window_view(xp, self.kernel, self.strides, self.dilations, out)
        flat = win.reshape(win.shape[: 2 + nd] + (-1,))
        arg = flat.argmax(axis=-1)
        y = np.take_along_axis(flat, arg[..., None], axis=-1)[..., 0]
        taps = np.unravel_index(arg, self.kernel)
        spatial = x.shape[2:]
        coords = []
        for i in range(nd):
            o = np.arange(out[i]).reshape((-1,) + (1,) * (nd - 1 - i)) * self.strides[i]
            coords.append(o + taps[i] * self.dilations[i] - begin[i])
        if self.storage_order == 0:
            lin = np.ravel_multi_index(coords, spatial)
        else:
            lin = np.ravel_multi_index(coords[::-1], spatial[::-1])
        base = (np.arange(n * c, dtype=np.int64) * int(np.prod(spatial))).reshape((n, c) + (1,) * nd)
        return y, (lin + base).astype(np.int64)
