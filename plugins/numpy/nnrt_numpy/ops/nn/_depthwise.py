"""Depthwise 2-D convolution (one input channel per group, any channel
multiplier, stride, dilation and padding) in cache-sized pieces of (image,
channel block), on the backend's thread pool.

Three ways, chosen per input shape (:func:`choose_mode`, measured in CPU time
on one thread on the PP-OCR / MobileNet shapes, see
``benchmarks/bench_mobile.py --kernel-ab`` and docs/performance-history.md):

* ``rows`` (inputs of at most :data:`ROWS_FACTOR` x the live kernel rows, output
  rows of :data:`ROWS_W` or more pixels: PP-OCR's 2- to 12-row maps): the piece's
  channels are copied into a scratch padded across only, the kernel-column
  shifts of every input row are copied out (hin x kw rows of wo values per
  channel, instead of kh x kw rows of ho x wp), and one batched BLAS product per
  piece, ``(cb, mult * ho, hin * kw + 1) @ (cb, hin * kw + 1, wo)``, writes the
  output: per channel a small GEMM whose weights are banded (output row r x
  input row s holds kernel row (s - r * sh + pad) / dh, zeros elsewhere; the
  bias times a row of ones in the last column).  It does hin / kh times the
  multiply-adds of ``cols`` but copies kh times fewer values and runs a GEMM
  per channel where ``cols`` runs a GEMV: 2-3x faster than ``cols`` on 2- and
  3-row maps, 1.2-1.9x on 10- and 12-row ones, slower from about 5 x kh rows
  (``benchmarks/bench_depthwise_ways.py``);

* ``cols`` (the default): the piece's channels are copied into a
  zero-padded scratch plane, their im2col columns (channels, taps, pixels)
  are copied out of a strided window view, and one batched BLAS product per
  piece, ``(cb, mult, taps) @ (cb, taps, pixels)``, writes the output.  With
  stride 1 the columns of a tap are one contiguous run of the padded plane
  (whole padded rows; the few wrapped-around outputs at the end of every row
  are dropped), copied in one piece: 1.3-2x faster than row by row;
* ``cl`` (output rows shorter than :data:`CL_ROW` with at least
  :data:`CL_SHORT` channels x images per piece, where im2col copies short
  runs: ShuffleNet's 14- and 7-wide maps, PP-OCR's 10 x 15; and strided
  kernels of more than :data:`CL_TAPS` taps with at least :data:`CL_WIDE`):
  the piece is copied channels-last into a zero-padded scratch
  ``(hp, wp, cb)`` and one ``einsum`` over its window view sums the taps
  with the channel axis contiguous; its result is copied into the output.

Kernel rows / columns that read only padding for every output are dropped
first (:func:`_trim`).

Either way the padding of the scratch planes is written once (when the
scratch is made) and only the interior is overwritten, scratch sets are
pooled per plan (one per concurrent piece) and can be made at compile time
(:meth:`DepthwisePlan.warm`), so steady runs allocate only their outputs.
In ``cols`` the bias is one more "tap" of the product (a row of ones in the
columns, written with the scratch), not a pass over the output.

Pieces run on :func:`nnrt_numpy.parallel.run_chunks` when the convolution is
large enough (:func:`nnrt_numpy.parallel.worth_splitting`).  NumPy releases the GIL inside each copy
and product, so two pieces run at once, but every return from one of those
calls takes the GIL back: a piece is therefore four or five NumPy calls on
views of its scratch set made once per set (``as_strided`` alone costs
microseconds) and next to no Python, which is what lets two threads reach
1.5-1.9x one thread (docs/performance-history.md).  A piece does the same calls on
the same values whichever thread runs it, so the result does not depend on
the thread count.
"""
from __future__ import annotations

import math
import threading
from typing import Callable, Sequence

import numpy as np

from ... import parallel
from ._spatial import window_view

__all__ = ["DepthwisePlan", "choose_mode", "ROWS_FACTOR", "ROWS_W", "ROWS_BAND", "BLOCK_BYTES",
           "CL_ROW", "CL_SHORT", "CL_TAPS", "CL_WIDE", "CL_LANES", "PIECES", "MODE"]

#: bytes of scratch (padded planes + im2col columns) per piece
BLOCK_BYTES = 2 << 20
#: output rows shorter than this take the channels-last einsum when a piece holds at least
#: CL_SHORT channels x images (ShuffleNet's 14- and 7-wide maps, PP-OCR's 10 x 15)
CL_ROW = 16
CL_SHORT = 96
#: strided convs with kernels of more than CL_TAPS taps take it from CL_WIDE channels x images
CL_TAPS = 9
CL_WIDE = 192
#: "rows", "cols" or "cl" forces that way for every plan (tests); None chooses per shape
MODE: str | None = None
#: ``rows`` for inputs of at most ROWS_FACTOR x (live kernel rows) rows and output rows of ROWS_W or more
#: pixels (it does hin / kh x the multiply-adds of im2col, but copies kh x fewer values and runs one small
#: GEMM per channel instead of a GEMV: ``benchmarks/bench_depthwise_ways.py``, docs/runtime.md)
ROWS_FACTOR = 4
ROWS_W = 12
#: ... and banded weights of at most this many values per channel (large kernels over many rows: im2col)
ROWS_BAND = 4096
#: channels-last pieces take images until they have this many channels
CL_LANES = 64
#: a convolution worth splitting is cut into at least this many pieces
PIECES = 4


def choose_mode(taps: int, out_w: int, lanes: int, flat: bool, rows: bool = False) -> str:
    """``rows``, ``cols`` or ``cl`` for a kernel of ``taps`` live taps, output rows of ``out_w``
    pixels, ``lanes`` channels x images per channels-last piece, whether im2col
    copies whole padded rows (``flat``: stride 1) and whether the input has few enough
    rows for ``rows`` (``rows``)."""
    if MODE is not None:
        return MODE
    if rows and out_w >= ROWS_W:
        return "rows"
    if out_w < CL_ROW and lanes >= CL_SHORT:
        return "cl"
    return "cl" if taps > CL_TAPS and lanes >= CL_WIDE and not flat else "cols"


def _trim(hw: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dil: Sequence[int],
          begin: Sequence[int], out: Sequence[int]) -> tuple[list, list, list, tuple]:
    """Drop the leading and trailing kernel rows / columns that read only padding for every
    output (a 5x5 kernel over a 2-row map: rows 0 and 4); returns the kernel, begin and end
    pads of the smaller convolution (same outputs) and the slices of the live taps."""
    kk, bb, ee, live = [], [], [], []
    for size, k, s, d, b, o in zip(hw, kernel, strides, dil, begin, out):
        # tap t reads input rows o * s - b + t * d; the first of them at or past row 0 is output -(-(b - t*d) // s)
        hits = [t for t in range(k) if o > 0 and (lo := max(0, -(-(b - t * d) // s))) < o and lo * s - b + t * d < size]
        t0, t1 = (hits[0], hits[-1] + 1) if hits else (0, k)
        b2 = b - t0 * d
        kk.append(t1 - t0)
        bb.append(b2)
        ee.append((o - 1) * s + (t1 - t0 - 1) * d + 1 - size - b2)
        live.append(slice(t0, t1))
    return kk, bb, ee, tuple(live)


class DepthwisePlan:
    """Everything shape-dependent for one input shape: padding, pieces, mode, scratch pool."""

    def __init__(self, n: int, c: int, mult: int, hw: Sequence[int], kernel: Sequence[int],
                 strides: Sequence[int], dil: Sequence[int], begin: Sequence[int], end: Sequence[int],
                 out: Sequence[int], dtype: np.dtype, mode: str | None = None) -> None:
        self.n, self.c, self.mult, self.dtype = n, c, mult, np.dtype(dtype)
        self.full_kernel = list(kernel)
        kernel, begin, end, self.live = _trim(hw, kernel, strides, dil, begin, out)
        self.kernel, self.strides, self.dil, self.out = list(kernel), list(strides), list(dil), list(out)
        # negative pads crop the input; positive ones pad the scratch plane
        self.crop = tuple(slice(max(-b, 0), s - max(-e, 0)) for b, e, s in zip(begin, end, hw))
        inner = [s - max(-b, 0) - max(-e, 0) for b, e, s in zip(begin, end, hw)]
        lo = [max(b, 0) for b in begin]
        self.padded = [i + b + max(e, 0) for i, b, e in zip(inner, lo, end)]
        self.inner = tuple(slice(b, b + i) for b, i in zip(lo, inner))
        self.lo, self.hin = lo, inner[0]  # for ``rows``: top padding and height of the (cropped) input
        self.taps = math.prod(kernel)  # math.prod: a plan is made per node at compile, np.prod costs µs
        self.npix = math.prod(out)
        self.work = n * c * mult * self.npix * self.taps
        #: estimated µs of one thread: the products and the copies of the padded input planes
        self.est_us = parallel.work_us("depthwise", self.work) + parallel.work_us("dw_input", n * c * math.prod(
            self.padded))
        # stride 1: im2col rows run over whole padded rows (see _cols); they need one spare zero row
        self.flat = len(self.padded) == 2 and self.strides == [1, 1]
        self.frow = self.out[0] * self.padded[1] if self.flat else self.npix  # pixels of one im2col row
        if mode is None:
            cb, ipp = self._blocks("cl")
            rows = (len(self.padded) == 2 and 1 < self.kernel[0] and self.hin <= self.kernel[0] * ROWS_FACTOR
                    and self.mult * self.out[0] * (self.hin * self.kernel[1] + 1) <= ROWS_BAND)
            mode = choose_mode(self.taps, self.out[-1], cb * ipp, self.flat, rows)
        self.mode = mode
        self.cb, self.ipp = self._blocks(mode)
        self.cblocks = -(-c // self.cb)
        self.iblocks = -(-n // self.ipp)
        self.nblocks = self.iblocks * self.cblocks
        #: (n0, n1, c0, c1) of every piece, images innermost
        self._pieces = [(b * self.ipp, min(n, (b + 1) * self.ipp), a * self.cb, min(c, (a + 1) * self.cb))
                        for a in range(self.cblocks) for b in range(self.iblocks)]
        self._pool: list[_Scratch] = []
        self._lock = threading.Lock()
        self._weights: tuple | None = None

    def _blocks(self, mode: str) -> tuple[int, int]:
        """Channels and images per piece in ``mode``: pieces of about :data:`BLOCK_BYTES`
        of scratch, at least :data:`PIECES` of them for a large convolution."""
        c, n = self.c, self.n
        plane = math.prod(self.padded)
        if mode == "cols":
            plane += (self.taps + 1 + self.mult) * self.frow + (self.padded[1] if self.flat else 0)
        elif mode == "rows":  # the plane is padded across only, columns of every input row x kernel column
            plane = self.hin * self.padded[1] + (self.hin * self.kernel[1] + 1) * self.out[1]
        cb = max(1, min(c, BLOCK_BYTES // (plane * self.dtype.itemsize)))
        if parallel.worth_splitting(self.est_us) and n * -(-c // cb) < PIECES:  # enough pieces for the threads
            floor = min(c, CL_LANES) if mode == "cl" else 1
            cb = max(floor, min(cb, c // -(-PIECES // n)))
        cb = -(-c // -(-c // cb))  # balanced blocks
        # channels-last with few channels: several images per piece, so einsum's inner loop is long enough
        ipp = min(n, -(-CL_LANES // c)) if mode == "cl" and cb >= c else 1
        return cb, ipp

    def for_node(self) -> "DepthwisePlan":
        """This plan for one more node: the same geometry, pieces and scratch pool (shared,
        under its lock), its own weights cache (a node's weights are not another's)."""
        plan = object.__new__(type(self))  # copy.copy's generic __reduce_ex__ path costs ~5 µs per node
        plan.__dict__.update(self.__dict__)
        plan._weights = None
        return plan

    # -- scratch and weights ------------------------------------------------------------
    def _new_scratch(self) -> "_Scratch":
        # the padded planes are zeros: their padding is never written again.  The im2col
        # columns and the product result are written whole by every piece before they are
        # read (only the row of ones is set here): ``empty``, not ``zeros``, whose clearing
        # of reused heap memory was most of a scratch set's cost (calloc clears no fresh pages
        # either way, so zeros touched no more pages than empty does)
        if self.mode == "cl":
            return _Scratch(np.zeros(tuple(self.padded) + (self.ipp * self.cb,), self.dtype))
        if self.mode == "rows":
            k = self.hin * self.kernel[1]
            cols = np.empty((self.cb, k + 1, self.out[1]), self.dtype)
            cols[:, k] = 1
            return _Scratch(np.zeros((self.cb, self.hin, self.padded[1]), self.dtype), cols)
        # im2col columns: ``taps`` rows and one row of ones (the bias's "tap", see :meth:`weights`)
        cols = np.empty((self.cb, self.taps + 1, self.frow), self.dtype)
        cols[:, self.taps] = 1
        if self.flat:  # one spare zero row per plane, im2col rows and the product over whole padded rows
            xp = np.zeros((self.cb, self.padded[0] + 1, self.padded[1]), self.dtype)
            return _Scratch(xp, cols, np.empty((self.cb, self.mult, self.frow), self.dtype))
        return _Scratch(np.zeros((self.cb,) + tuple(self.padded), self.dtype), cols)

    def warm(self, count: int) -> None:
        """Make ``count`` scratch sets now (at compile time) instead of on the first run,
        with the views a piece of every size this plan cuts takes of them."""
        with self._lock:
            while len(self._pool) < count:
                self._pool.append(self._new_scratch())
            for scratch in self._pool:  # (the nodes of one geometry share the pool: once per scratch set)
                if not scratch.warmed:
                    for n0, n1, c0, c1 in self._pieces:
                        self._views(scratch, n1 - n0, c1 - c0)
                    scratch.warmed = True

    def ready(self) -> int:
        """How many scratch sets wait in the pool."""
        with self._lock:
            return len(self._pool)

    def _take(self) -> "_Scratch":
        with self._lock:
            if self._pool:
                return self._pool.pop()
        return self._new_scratch()

    def _give(self, scratch: "_Scratch") -> None:
        with self._lock:
            self._pool.append(scratch)

    def weights(self, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
        """``w`` (C * mult, 1, kh, kw) as (C, mult, taps) for ``cols`` (with ``bias`` (C * mult,):
        (C, mult, taps + 1), the bias multiplying the columns' row of ones) or (kh, kw, C, mult)
        for ``cl``; cached for the last ``w`` and ``bias`` seen."""
        cached = self._weights
        if cached is not None and cached[0] is w and cached[1] is bias:
            return cached[2]
        wt = w.reshape((self.c, self.mult) + tuple(self.full_kernel))[(Ellipsis,) + self.live]
        wt = wt.astype(self.dtype, copy=False)
        if self.mode == "cl":  # repeated for the images of a piece
            wt = np.ascontiguousarray(np.tile(wt.transpose(2, 3, 0, 1), (1, 1, self.ipp, 1)))
        elif self.mode == "rows":
            wt = self._banded(wt, bias)
        elif bias is None:
            wt = np.ascontiguousarray(wt.reshape(self.c, self.mult, self.taps))
        else:
            wt = np.concatenate([wt.reshape(self.c, self.mult, self.taps),
                                 bias.astype(self.dtype, copy=False).reshape(self.c, self.mult, 1)], axis=2)
        self._weights = (w, bias, wt)
        return wt

    def _views(self, scratch: "_Scratch", ni: int, nc: int) -> tuple:
        """The views of ``scratch`` a piece of ``ni`` images x ``nc`` channels writes and reads
        (made once per scratch set and piece size: ``as_strided`` costs microseconds, held under
        the GIL)."""
        key = (ni, nc)
        views = scratch.views.get(key)
        if views is None:
            if self.mode == "rows":
                views = self._rows_views(scratch, nc)
            else:
                views = self._cl_views(scratch.bufs[0], ni, nc) if self.mode == "cl" else self._cols_views(scratch, nc)
            scratch.views[key] = views
        return views

    # -- run ------------------------------------------------------------------------
    def run(self, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, y: np.ndarray,
            nthreads: int = 1, epilogue: Callable[[np.ndarray], None] | None = None) -> np.ndarray:
        """Write the convolution of ``x`` (N, C, H, W) into ``y`` (N, C*mult, ho, wo),
        C-contiguous; ``bias`` is (C*mult,) or None.  ``epilogue`` (a fused chain's per-value
        tails, in place) runs on each piece's output right after it, on the thread that made it.
        Every piece is the same calls on the same values whichever thread runs it, so the result
        does not depend on ``nthreads``."""
        xc = x[(slice(None), slice(None)) + self.crop]
        y4 = y.reshape(self.n, self.c, self.mult, self.npix)
        if self.mode == "cl":
            wt = self.weights(w)
            bcol = None if bias is None else bias.reshape(self.c, self.mult, 1, 1)
            work = self._cl
        else:
            wt, bcol = self.weights(w, bias), None
            work = self._rows if self.mode == "rows" else self._cols
        pieces = self._pieces

        def piece(i: int) -> None:
            n0, n1, c0, c1 = pieces[i]
            scratch = self._take()
            try:
                work(xc[n0:n1, c0:c1], wt, bcol, c0, c1, self._views(scratch, n1 - n0, c1 - c0), y4[n0:n1, c0:c1])
            finally:
                self._give(scratch)
            if epilogue is not None:
                epilogue(y4[n0:n1, c0:c1])

        parallel.run_chunks(piece, self.nblocks, nthreads)
        return y

    def _cols_views(self, scratch: "_Scratch", nb: int) -> tuple:
        """(interior of the padded planes, window / tap-run view, im2col rows of the taps,
        columns with the ones row, product result, its live outputs) for ``nb`` channels."""
        xp, cols = scratch.bufs[0][:nb], scratch.bufs[1][:nb]
        interior = xp[(slice(None),) + self.inner]
        taps = cols[:, :self.taps]
        if not self.flat:
            win = window_view(xp, self.kernel, self.strides, self.dil, self.out).transpose(0, 3, 4, 1, 2)
            return interior, win, taps.reshape(win.shape), cols, None, None
        # stride 1: the im2col row of tap (i, j) is one contiguous run of the padded plane, ``ho * wp``
        # values from ``i * dh * wp + j * dw`` (the last ``wp - wo`` of every output row wrap around and
        # are dropped after the product), so it is copied in one piece rather than row by row
        (kh, kw), (dh, dw), (ho, wo), wp = self.kernel, self.dil, self.out, self.padded[1]
        full = scratch.bufs[0][:nb]
        st = full.strides
        runs = np.lib.stride_tricks.as_strided(full, (nb, kh, kw, self.frow), (st[0], dh * st[1], dw * st[2], st[2]),
                                               writeable=False)
        if wp == wo:
            return interior, runs, taps.reshape(runs.shape), cols, None, None
        res = scratch.bufs[2][:nb]
        return interior, runs, taps.reshape(runs.shape), cols, res, res.reshape(nb, self.mult, ho, wp)[..., :wo]

    def _cols(self, xb: np.ndarray, wt: np.ndarray, bcol: None, c0: int, c1: int, views: tuple,
              dst: np.ndarray) -> None:
        """im2col of one piece (one image, channels ``c0:c1``) and one batched product into
        ``dst`` (1, cb, mult, pixels); the bias, when ``wt`` has it, is the product's last tap."""
        interior, win, taps, cols, res, live = views
        np.copyto(interior, xb[0])
        np.copyto(taps, win)
        wb = wt[c0:c1]
        k = wb.shape[2]
        src = cols[:, :k] if k == self.taps else cols
        if res is None:
            np.matmul(wb, src, out=dst[0])
            return
        np.matmul(wb, src, out=res)
        np.copyto(dst[0].reshape(live.shape), live)

    def _banded(self, wt: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        """``rows`` weights: (C, mult * ho, hin * kw [+ 1]), output row ``r`` x input row ``s`` holding
        kernel row ``i`` where ``s = r * sh - top + i * dh`` (zeros where no kernel row meets that input
        row), the bias (per channel, every output row) as the last column."""
        (kh, kw), ho, sh, dh = self.kernel, self.out[0], self.strides[0], self.dil[0]
        width = self.hin * kw
        row = width + (bias is not None)
        # written in place in the one result (a band array and a concatenate with the bias column
        # cost two more arrays of its size, and their page faults, per node)
        out = np.zeros((self.c, self.mult, ho * row), self.dtype)
        step = (row + sh * kw) * out.itemsize  # from (r, s) to (r + 1, s + sh): a diagonal of the band
        if dh == 1:  # output row r reads input rows r * sh - top + (0 .. kh - 1): one run of kh * kw values
            flat = wt.reshape(self.c, self.mult, kh * kw)
            first = -(-self.lo[0] // sh)  # the rows whose whole kernel lies inside the input
            stop = max(first, min(ho, (self.hin - kh + self.lo[0]) // sh + 1))
            if stop > first:  # all of them in one strided copy
                at = first * row + (first * sh - self.lo[0]) * kw
                np.lib.stride_tricks.as_strided(out[:, :, at:], (self.c, self.mult, stop - first, kh * kw),
                                                out.strides[:2] + (step, out.itemsize))[...] = flat[:, :, None]
            for r in [*range(min(first, ho)), *range(stop, ho)]:  # the rows cut by the top or bottom edge
                top = r * sh - self.lo[0]
                i0, i1 = max(0, -top), min(kh, self.hin - top)
                if i1 > i0:
                    at = r * row + (top + i0) * kw
                    out[:, :, at:at + (i1 - i0) * kw] = flat[:, :, i0 * kw:i1 * kw]
        else:
            for i in range(kh):  # one strided copy per kernel row
                at = i * dh - self.lo[0]  # input row s = r * sh + at
                r0, r1 = max(0, -(at // sh)), min(ho, (self.hin - 1 - at) // sh + 1)  # 0 <= s < hin
                if r1 > r0:
                    start = r0 * row + (r0 * sh + at) * kw
                    np.lib.stride_tricks.as_strided(out[:, :, start:], (self.c, self.mult, r1 - r0, kw),
                                                    out.strides[:2] + (step, out.itemsize))[...] = wt[:, :, i, None]
        out = out.reshape(self.c, self.mult, ho, row)
        if bias is not None:
            out[:, :, :, width] = bias.astype(self.dtype, copy=False).reshape(self.c, self.mult, 1)
        return out.reshape(self.c, self.mult * ho, row)

    def _rows_views(self, scratch: "_Scratch", nb: int) -> tuple:
        """(interior of the planes padded across, window view (nb, hin, kw, wo), its im2col rows,
        columns with the ones row) for ``nb`` channels."""
        xp, cols = scratch.bufs[0][:nb], scratch.bufs[1][:nb]
        st = xp.strides
        (kw, sw, dw), wo = (self.kernel[1], self.strides[1], self.dil[1]), self.out[1]
        win = np.lib.stride_tricks.as_strided(xp, (nb, self.hin, kw, wo), (st[0], st[1], dw * st[2], sw * st[2]),
                                              writeable=False)
        return xp[:, :, self.inner[1]], win, cols[:, :self.hin * kw].reshape(win.shape), cols

    def _rows(self, xb: np.ndarray, wt: np.ndarray, bcol: None, c0: int, c1: int, views: tuple,
              dst: np.ndarray) -> None:
        """One piece (one image, channels ``c0:c1``) as a batch of small GEMMs, (mult * ho, hin * kw [+ 1])
        @ (hin * kw [+ 1], wo) per channel, straight into ``dst`` (1, cb, mult, pixels)."""
        interior, win, taps, cols = views
        np.copyto(interior, xb[0])
        np.copyto(taps, win)
        wb = wt[c0:c1]
        src = cols if wb.shape[2] == cols.shape[1] else cols[:, :wb.shape[2]]
        np.matmul(wb, src, out=dst[0].reshape(c1 - c0, self.mult * self.out[0], self.out[1]))

    def _cl_views(self, xp: np.ndarray, ni: int, nc: int) -> tuple:
        """(where a piece's input goes, the window view the einsum reads) for ``ni`` images x ``nc`` channels."""
        nb = ni * nc  # images x channels, as one channels-last axis
        xp = xp[..., :nb]
        st = xp.strides
        if ni == 1:
            target = xp[self.inner]
        else:  # a piece holds all channels of ``ni`` images: (hp, wp, ipp * C) seen as (hp, wp, ipp, C)
            split = np.lib.stride_tricks.as_strided(xp, xp.shape[:2] + (ni, nc), st[:2] + (nc * st[2], st[2]))
            target = split[self.inner]
        (sh, sw), (dh, dw), (ho, wo) = self.strides, self.dil, self.out
        view = np.lib.stride_tricks.as_strided(
            xp, (ho, wo) + tuple(self.kernel) + (nb,),
            (st[0] * sh, st[1] * sw, st[0] * dh, st[1] * dw, st[2]), writeable=False)
        return target, view

    def _cl(self, xb: np.ndarray, wt: np.ndarray, bcol: np.ndarray | None, c0: int, c1: int, views: tuple,
            dst: np.ndarray) -> None:
        """Channels-last einsum of one piece (images, channels, h, w) into ``dst`` (images, cb, mult, pixels)."""
        ni, nc = xb.shape[:2]
        target, view = views
        np.copyto(target, xb[0].transpose(1, 2, 0) if ni == 1 else xb.transpose(2, 3, 0, 1))
        wb = wt[:, :, c0:c0 + ni * nc]
        ho, wo = self.out
        # einsum picks a fast loop order for a fresh (h, w, c) result, not when given ``out``
        if self.mult == 1:
            res = np.einsum("hwijc,ijc->chw", view, wb[..., 0])
        else:
            res = np.einsum("hwijc,ijcm->cmhw", view, wb)
        res = res.reshape(ni, nc, self.mult, ho, wo)
        out = dst.reshape(res.shape)
        if bcol is None:
            np.copyto(out, res)
        else:  # the same sums as copying, then adding the bias
            np.add(res, bcol[c0:c1], out=out)


class _Scratch:
    """One piece's scratch buffers, the views of them per piece size, and whether
    :meth:`DepthwisePlan.warm` made the views of every piece size of its plan."""

    __slots__ = ("bufs", "views", "warmed")

    def __init__(self, *bufs: np.ndarray) -> None:
        self.bufs = bufs
        self.views: dict[tuple, tuple] = {}
        self.warmed = False
