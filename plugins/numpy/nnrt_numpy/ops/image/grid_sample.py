"""GridSample (opsets 16, 20, 22): sample ``X`` (N, C, *spatial) at the
normalized grid locations (N, *out, r) with nearest / (bi,tri)linear /
(bi)cubic interpolation and zeros / border / reflection padding.

Version 16 is 2-D only with mode names bilinear / nearest / bicubic; 20+
accepts any spatial rank with linear / nearest / cubic.  The last grid axis
lists coordinates fastest-axis first (x, y[, z])."""
from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Reflect coordinates into [lo, hi] by repeatedly mirroring at the borders."""
    rng = hi - lo
    if rng <= 0:
        return np.full_like(x, lo)
    below = x < lo
    above = x > hi
    dx = np.where(below, lo - x, x - hi)
    n = np.trunc(dx / rng)
    r = dx - n * rng
    even = (n % 2) == 0
    out_below = np.where(even, lo + r, hi - r)
    out_above = np.where(even, hi - r, lo + r)
    return np.where(below, out_below, np.where(above, out_above, x))


def _cubic_weights(t: np.ndarray, a: float = -0.75) -> list[np.ndarray]:
    """Keys cubic weights of the taps at offsets -1, 0, 1, 2 for fractional part ``t``."""
    def near(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


class _GridSampleBase(Kernel):
    op_type = "GridSample"
    _modes: dict[str, str] = {}
    _max_spatial: int | None = None

    def _setup(self, node: NodeInfo) -> None:
        mode = node.attr("mode", "bilinear" if "bilinear" in self._modes else "linear")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if mode not in self._modes:
            raise self.fail(f"mode must be one of {sorted(self._modes)}, got {mode!r}")
        self.mode = self._modes[mode]
        pm = node.attr("padding_mode", "zeros")
        self.padding = pm.decode() if isinstance(pm, bytes) else pm
        if self.padding not in ("zeros", "border", "reflection"):
            raise self.fail(f"padding_mode must be zeros, border or reflection, got {self.padding!r}")
        self.align = bool(node.attr("align_corners", 0))

    def __call__(self, x, grid) -> Sequence[Any]:
        x = np.asarray(x)
        grid = np.asarray(grid)
        nsp = x.ndim - 2
        if nsp < 1 or (self._max_spatial and nsp > self._max_spatial):
            raise self.fail(f"unsupported input rank {x.ndim}")
        if grid.ndim != x.ndim or grid.shape[0] != x.shape[0] or grid.shape[-1] != nsp:
            raise self.fail(f"grid must have shape (N, *out, {nsp}) for input {x.shape}, got {grid.shape}")
        n = x.shape[0]
        dims = x.shape[2:]
        out_sp = grid.shape[1:-1]
        cdt = np.float64 if x.dtype == np.float64 or grid.dtype == np.float64 else np.float32
        g = grid.astype(cdt)
        # per spatial axis (in input order): coordinates and border range
        coords, lo, hi = [], [], []
        for d in range(nsp):
            size = dims[d]
            gv = g[..., nsp - 1 - d]
            c = (gv + 1) / 2 * (size - 1) if self.align else ((gv + 1) * size - 1) / 2
            coords.append(c)
            lo.append(0.0 if self.align else -0.5)
            hi.append(size - 1.0 if self.align else size - 0.5)
        if self.mode == "nearest":
            coords = [np.rint(c) for c in coords]
        for d in range(nsp):
            c = coords[d]
            if self.padding == "border":
                coords[d] = np.where((c < lo[d]) | (c > hi[d]), np.clip(c, 0, dims[d] - 1), c)
            elif self.padding == "reflection":
                coords[d] = _reflect(c, lo[d], hi[d])
        taps = []  # per axis: list of (index array, weight array or None)
        for d in range(nsp):
            c = coords[d]
            if self.mode == "nearest":
                taps.append([(c.astype(np.int64), None)])
                continue
            f = np.floor(c)
            t = c - f
            fi = f.astype(np.int64)
            if self.mode == "linear":
                taps.append([(fi, 1 - t), (fi + 1, t)])
            else:
                w = _cubic_weights(t)
                taps.append([(fi + k - 1, w[k]) for k in range(4)])
        xt = np.moveaxis(x, 1, -1).astype(cdt)  # (N, *spatial, C)
        bidx = np.arange(n).reshape((n,) + (1,) * len(out_sp))
        out = np.zeros((n,) + tuple(out_sp) + (x.shape[1],), dtype=cdt)
        for combo in itertools.product(*taps):
            idx, weight, valid = [], None, None
            for d, (i, w) in enumerate(combo):
                if self.padding == "zeros":
                    ok = (i >= 0) & (i < dims[d])
                    valid = ok if valid is None else valid & ok
                    i = np.clip(i, 0, dims[d] - 1)
                elif self.padding == "border":
                    i = np.clip(i, 0, dims[d] - 1)
                else:
                    i = np.clip(np.trunc(_reflect(i.astype(cdt), lo[d], hi[d])).astype(np.int64), 0, dims[d] - 1)
                idx.append(i)
                if w is not None:
                    weight = w if weight is None else weight * w
            vals = xt[(bidx,) + tuple(idx)]
            if weight is not None:
                vals = vals * weight[..., None]
            if valid is not None:
                vals = np.where(valid[..., None], vals, 0)
            out += vals
        y = np.moveaxis(out, -1, 1)
        if x.dtype.kind in "iu":
            info = np.iinfo(x.dtype)
            return (np.clip(np.rint(y), info.min, info.max).astype(x.dtype),)
        return (y.astype(x.dtype),)


@register
class GridSample16(_GridSampleBase):
    since_version = 16
    _modes = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}
    _max_spatial = 2


@register
class GridSample20(_GridSampleBase):
    since_version = 20
    _modes = {"linear": "linear", "nearest": "nearest", "cubic": "cubic"}
