"""Conv: N-d convolution with groups, strides, dilations and (auto) padding.

Three strategies, chosen per call from static attributes:

* 1x1 kernels without padding: a plain (grouped) matmul,
* depthwise (one input channel per group), 1-D and 2-D: ``_depthwise.py``
  (pieces of channels on the thread pool: im2col + one batched product, a
  channels-last einsum for large kernels over short rows, or banded GEMMs per
  channel for maps of few rows); 3-D: a
  multiply-add per kernel tap over the whole batch,
* everything else: im2col through a strided window view, then one batched
  BLAS matmul over (batch, group); large ones in pieces of output rows
  (columns of cache size, ``PIECE_BYTES``) on the idle cores, or on one
  thread from ``BLOCK_FROM`` bytes of whole im2col.  A split convolution
  runs a fused chain's per-value tails (``epilogue=``) on each piece.

float16 and ml_dtypes (bfloat16...) inputs are computed in float32.
"""
from __future__ import annotations

import functools
import importlib
import math
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ... import parallel
from ...kernel import Kernel, NodeInfo, register
from ...shared import shared
from ._spatial import pad_spatial, resolve_pads, tap_slices, window_misfit, window_view

if TYPE_CHECKING:
    from ._depthwise import DepthwisePlan

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
#: 2-D depthwise convs with at most this many outputs take the per-tap loop of 3-D ones (tests raise it):
#: ``_depthwise.py``'s im2col measured 1.5-3x faster on every shape down to 16 x 3 x 96 (docs/performance-history.md)
TAP_LOOP_MAX = 0
#: im2col columns of one piece of a split convolution: at most about this many bytes (an L2 cache), so
#: a piece's columns are still in cache when its GEMM reads them; a convolution whose weights take at
#: most half of it (every piece packs all the weights again) runs in such pieces on one thread too
#: (PP-OCR det's 3x3 convs: ~1.7x faster, docs/runtime.md) ...
PIECE_BYTES = 1 << 20
#: a constant bias is added as an (M, pixels) array (cached per pixel count, the last BIAS_PLANES
#: counts per node) up to this many values (512 KiB of float32: at most ~2x a node's output for one
#: image, per input size): numpy adds a same-shape operand ~2x faster than an (M, 1) column broadcast
#: along rows of 200-1000 pixels (8 x 200 x 192: 91 -> 40 us), with the same sums
BIAS_ROWS_MAX = 1 << 17
BIAS_PLANES = 2
#: ... from this many bytes of whole im2col on (below, the ~10 us per piece cost more: 3-9 % slower
#: at 0.3-3 ms convolutions of 0.4-7 MB of columns)
BLOCK_FROM = 8 << 20


@functools.cache
def _depthwise() -> ModuleType:
    """``_depthwise.py``, imported by the first depthwise conv: models without one
    (most) do not pay for compiling it at every process start (then kept: a node asks
    several times at compile, ``import_module`` costs microseconds)."""
    return importlib.import_module("._depthwise", __package__)


def _im2col(x: np.ndarray, kernel, strides, dil, begin, end, out) -> np.ndarray:
    """Contiguous im2col columns of ``x``: (N, C, taps, output pixels)."""
    nd = len(out)
    win = window_view(pad_spatial(x, begin, end), kernel, strides, dil, out)  # (N, C, *out, *k)
    perm = (0, 1) + tuple(range(2 + nd, 2 + 2 * nd)) + tuple(range(2, 2 + nd))
    return np.ascontiguousarray(win.transpose(perm)).reshape(x.shape[0], x.shape[1], -1, int(np.prod(out)))


@register
class Conv(Kernel):
    """Conv-1 / Conv-11 (the versions only differ in type constraints)."""

    op_type = "Conv"
    since_version = 1
    #: ``__call__`` takes ``out=``: an array of the output's shape to write into
    #: (used to place outputs straight into a Concat buffer, see program.py)
    accepts_out = True
    #: ``__call__`` takes ``epilogue=``: an in-place per-value function (a fused chain's
    #: tails, see fusion.py) it applies to all of its output once; a convolution split over
    #: threads applies it to each piece on the thread that computed it, while in cache
    accepts_epilogue = True

    def _setup(self, node: NodeInfo) -> None:
        self.auto_pad = node.attr("auto_pad", "NOTSET")
        if isinstance(self.auto_pad, bytes):
            self.auto_pad = self.auto_pad.decode()
        if self.auto_pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
            raise self.fail(f"unknown auto_pad {self.auto_pad!r}")
        self.group = int(node.attr("group", 1))
        if self.group < 1:
            raise self.fail("group must be >= 1")
        self.kernel_shape = node.attr("kernel_shape")
        self.strides = node.attr("strides")
        self.dilations = node.attr("dilations")
        self.pads = node.attr("pads")
        self._plans: dict[tuple, Any] = {}
        w = node.const(1)
        self._w_const = w
        self._wmat = self._weight_matrix(w) if w is not None and w.dtype.kind == "f" and w.dtype != np.float16 else None
        b = node.const(2) if node.present(2) else None
        self._b_const = b
        self._bias = None if b is None else b.reshape(-1, 1)
        #: input shape -> what a stride-1 1x1 conv with the constant weights needs at run time (see _pointwise)
        self._pw: dict[tuple, tuple] = {}
        self._bias_planes: dict[int, np.ndarray] = {}  # pixels -> the constant bias as (M, pixels)
        #: input shape -> (dtype, weight shape, outputs, output spatial shape, plan) of a depthwise conv run before
        self._dwf: dict[tuple, tuple] = {}
        self._warm_depthwise(node)

    def _weight_matrix(self, w: np.ndarray) -> np.ndarray:
        if w.ndim < 3:
            raise self.fail(f"weight W has shape {list(w.shape)}; expected rank >= 3 (M, C/group, kernel...)")
        m = w.shape[0]
        if m % self.group:
            raise self.fail(f"output channels {m} not divisible by group {self.group}")
        return np.ascontiguousarray(w.reshape(self.group, m // self.group, -1))

    def _plan(self, xshape: tuple, wshape: tuple) -> tuple:
        key = (xshape, wshape)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        nd = len(xshape) - 2
        if nd < 1:
            raise self.fail(f"input X has shape {list(xshape)}; expected rank >= 3 (N, C, spatial...)")
        if len(wshape) != nd + 2:
            raise self.fail(f"weight rank {len(wshape)} does not match input rank {len(xshape)}")
        kernel = list(self.kernel_shape) if self.kernel_shape is not None else list(wshape[2:])
        if list(kernel) != list(wshape[2:]):
            raise self.fail(f"kernel_shape {kernel} does not match weight shape {list(wshape)}")
        strides = list(self.strides) if self.strides else [1] * nd
        dil = list(self.dilations) if self.dilations else [1] * nd
        if len(strides) != nd or len(dil) != nd:
            raise self.fail("strides/dilations must have one entry per spatial axis")
        if self.pads is not None and len(self.pads) != 2 * nd:
            raise self.fail("pads must have two entries per spatial axis")
        if xshape[1] != wshape[1] * self.group:
            raise self.fail(
                f"input channels {xshape[1]} != weight channels {wshape[1]} * group {self.group}"
            )
        begin, end, out, _ = resolve_pads(self.auto_pad, xshape[2:], kernel, strides, dil, self.pads)
        misfit = window_misfit(xshape[2:], kernel, dil, begin, end)
        if misfit is not None:
            raise self.fail(misfit)
        pointwise = all(k == 1 for k in kernel) and not any(begin) and not any(end)
        depthwise = wshape[1] == 1 and self.group == xshape[1] and self.group > 1
        plan = (nd, kernel, strides, dil, begin, end, out, pointwise, depthwise)
        self._plans[key] = plan
        return plan

    def __call__(self, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None,
                 out: np.ndarray | None = None,
                 epilogue: Callable[[np.ndarray], None] | None = None) -> tuple[np.ndarray]:
        pending = [] if epilogue is None else [epilogue]  # _run_pieces takes it when it applies it
        if x.dtype == np.float16 or x.dtype.kind == "V":  # no BLAS for these: accumulate in float32
            b32 = None if b is None else b.astype(np.float32)
            y = self._run(x.astype(np.float32), w.astype(np.float32), b32).astype(x.dtype)
        else:
            y = self._run(x, w, b, out, pending)  # writes into ``out`` when it can
        if out is not None and y is not out:
            if y.shape != out.shape:
                raise self.fail(f"output shape {y.shape} differs from the planned {out.shape}")
            np.copyto(out, y)
            y = out
        if pending:
            pending[0](y)
        return (y,)

    def _run(self, x: np.ndarray, w: np.ndarray, b: np.ndarray | None, dest: np.ndarray | None = None,
             pending: list | None = None) -> np.ndarray:
        pw = self._pw.get(x.shape) if w is self._w_const else None
        if pw is not None and x.dtype == pw[0] and (b is None or b is self._b_const) and x.flags.c_contiguous \
                and pw[5] + (pw[6] if pending else 0.0) < parallel.SPLIT_US and (dest is None or (
                    dest.shape == pw[7] and dest.dtype == pw[0] and dest.flags.c_contiguous)):
            return self._pointwise(x, b, pw, dest)  # never splits: skip the checks
        dwf = self._dwf.get(x.shape) if dest is None else None
        if dwf is not None and x.dtype == dwf[0] and w.dtype == dwf[0] and w.shape == dwf[1] and dwf[2] > TAP_LOOP_MAX:
            return self._depthwise_flat(x, w, b, dwf[3], None, pending, dwf[4])  # checked when planned
        nd, kernel, strides, dil, begin, end, out, pointwise, depthwise = self._plan(x.shape, w.shape)
        n, c = x.shape[:2]
        m = w.shape[0]
        g = self.group
        dtype = np.result_type(x.dtype, w.dtype)
        npix = math.prod(out)
        mm_out = None  # write the matmul result straight into ``dest`` when it is laid out as (n, g, m/g, npix)
        if dest is not None and not depthwise and dest.dtype == dtype and dest.shape == (n, m) + tuple(out) \
                and dest.flags.c_contiguous:
            mm_out = dest.reshape(n, g, m // g, npix)
        matmul = parallel.matmul  # splits a large product when threads are free
        if not depthwise and nd == 2 and x.dtype == w.dtype and dtype.kind == "f" and x.flags.c_contiguous:
            macs = n * m * npix * (c // g) * math.prod(kernel)
            us = parallel.work_us("gemm" if pointwise else "im2col", macs)
            if pointwise and w is self._w_const and self._wmat is not None and x.shape[2:] == tuple(out):
                self._pw[x.shape] = (x.dtype, n, g, c // g, npix, us, parallel.work_us("tail", n * m * npix),
                                     (n, m) + tuple(out))
            k = parallel.split_threads(us + parallel.work_us("tail", n * m * npix) if pending else us)
            if k > 1:
                epi = pending.pop() if pending else None
                return self._run_pieces(x, w, b, kernel, strides, dil, begin, end, out, pointwise, dest, k, epi)
            taps = (c // g) * math.prod(kernel)
            if not (pointwise and all(s_ == 1 for s_ in strides)) and n * g * taps * npix * x.dtype.itemsize > \
                    BLOCK_FROM and PIECE_BYTES >= 2 * (m // g) * taps * x.dtype.itemsize:  # 2 x weights fit
                return self._run_pieces(x, w, b, kernel, strides, dil, begin, end, out, pointwise, dest, 1)
            matmul = np.matmul  # already known to run on one thread
        if depthwise and nd <= 2 and dtype in _FLOATS and x.dtype == w.dtype and npix and \
                n * m * npix > TAP_LOOP_MAX:
            return self._depthwise_flat(x, w, b, out, dest, pending)
        if depthwise:
            y = self._depthwise(x, w, kernel, strides, dil, begin, end, out)
        elif pointwise:
            xs = x if x.shape[2:] == tuple(out) else \
                x[(slice(None), slice(None)) + tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(out, strides))]
            cols = xs.reshape(n, g, c // g, npix)
            y = matmul(self._weights_for(w), cols, out=mm_out)
        else:
            cols = _im2col(x, kernel, strides, dil, begin, end, out).reshape(n, g, -1, npix)
            y = matmul(self._weights_for(w), cols, out=mm_out)
        y = y.reshape(n, m, npix)
        if b is not None:
            y += self._bias_rows(b, npix)
        if mm_out is not None:
            return dest
        return y.reshape((n, m) + tuple(out)).astype(dtype, copy=False)

    def _pointwise(self, x: np.ndarray, b: np.ndarray | None, pw: tuple, dest: np.ndarray | None) -> np.ndarray:
        """A stride-1 1x1 conv with the constant weights (and bias) on one thread: the product and
        bias of :meth:`_run`'s pointwise way, without its per-call checks (done for this shape),
        into ``dest`` when given (C-contiguous, of the output's shape and dtype)."""
        _, n, g, cg, npix, _, _, shape = pw
        mm_out = None if dest is None else dest.reshape(n, g, shape[1] // g, npix)
        y = np.matmul(self._wmat, x.reshape(n, g, cg, npix), out=mm_out)
        if b is not None:
            y = y.reshape(n, shape[1], npix)
            y += self._bias_rows(b, npix)
        return y.reshape(shape) if dest is None else dest

    def _weights_for(self, w: np.ndarray) -> np.ndarray:
        """The (g, m/g, c/g * taps) weight matrix: prepared at compile time for constant weights."""
        return self._wmat if self._wmat is not None and w is self._w_const else self._weight_matrix(w)

    def _bias_rows(self, b: np.ndarray, npix: int) -> np.ndarray:
        """The bias to add to an (N, M, ``npix``) result: the constant bias repeated along the
        pixels as one (M, npix) array (cached, see :data:`BIAS_ROWS_MAX`), else an (M, 1) column."""
        col = self._bias_for(b)
        if col is not self._bias or col.shape[0] * npix > BIAS_ROWS_MAX:
            return col
        plane = self._bias_planes.get(npix)
        if plane is None:
            while len(self._bias_planes) >= BIAS_PLANES:  # several image sizes: keep the memory bounded
                self._bias_planes.pop(next(iter(self._bias_planes)), None)
            plane = self._bias_planes[npix] = np.ascontiguousarray(np.broadcast_to(col, (col.shape[0], npix)))
        return plane

    def _bias_for(self, b: np.ndarray) -> np.ndarray:
        """The bias as an (m, 1) column: prepared at compile time for a constant bias."""
        return self._bias if self._bias is not None and b is self._b_const else b.reshape(-1, 1)

    def _run_pieces(self, x, w, b, kernel, strides, dil, begin, end, out, pointwise, dest, k,
                    epilogue: Callable[[np.ndarray], None] | None = None) -> np.ndarray:
        """2-D Conv split into pieces run on ``k`` threads (nnrt_numpy.parallel):
        each piece builds its own im2col columns, runs its GEMM into its part
        of the output and adds the bias there (then runs ``epilogue`` on it),
        so the copies and tails run in parallel too and stay in cache.  Pieces are ranges of output rows, or of output
        channels when there are fewer pixels than channels.  OpenBLAS may pick
        other kernels for the smaller products, so values can differ from the
        unsplit convolution in the last bits (as with OpenBLAS's own threads);
        they do not depend on which thread ran a piece."""
        n, c = x.shape[:2]
        m = w.shape[0]
        g = self.group
        cg, mg = c // g, m // g
        ho, wo = out
        npix = ho * wo
        wmat = self._weights_for(w)
        bias = self._bias_for(b) if b is not None else None
        if dest is not None and dest.dtype == x.dtype and dest.shape == (n, m, ho, wo) and dest.flags.c_contiguous:
            y = dest
        else:
            y = np.empty((n, m, ho, wo), dtype=x.dtype)
        y3 = y.reshape(n, m, npix)
        direct = pointwise and all(s_ == 1 for s_ in strides)  # columns are a view of x (no copy)
        if pointwise:
            src = x[:, :, : (ho - 1) * strides[0] + 1: strides[0], : (wo - 1) * strides[1] + 1: strides[1]]
        else:
            src = window_view(pad_spatial(x, begin, end), kernel, strides, dil, out)  # (N, C, ho, wo, kh, kw)
        x3 = x.reshape(n, c, -1)
        per = max(k, min(4 * k, n * m * npix * wmat.shape[-1] // (2 * parallel.MIN_MACS)))  # pieces of >= ~0.1 ms
        jobs: list[tuple] = []
        if npix >= mg:  # ranges of output rows (each piece packs all weights: fewer weights than columns)
            rows = max(1, -(-ho // max(1, -(-per // (n * g)))), -(-64 // wo))
            if not direct and 2 * wmat[0].nbytes <= PIECE_BYTES:  # columns of a piece within PIECE_BYTES
                rows = max(1, -(-64 // wo), min(rows, PIECE_BYTES // (wmat.shape[-1] * wo * x.dtype.itemsize)))
            for bi in range(n):
                for gi in range(g):
                    for r0 in range(0, ho, rows):
                        jobs.append((bi, gi, r0, min(ho, r0 + rows), 0, mg))
        else:  # ranges of output channels, columns built once per (image, group)
            step = max(16, -(-mg // max(1, -(-k // (n * g)))))  # one piece per thread: each packs all columns
            for bi in range(n):
                for gi in range(g):
                    for m0 in range(0, mg, step):
                        jobs.append((bi, gi, 0, ho, m0, min(mg, m0 + step)))
        full_cols: dict[tuple[int, int], np.ndarray] = {}
        if jobs and jobs[0][2:4] == (0, ho):
            for bi in range(n):
                for gi in range(g):
                    full_cols[(bi, gi)] = self._cols(x3, src, bi, gi, cg, 0, ho, wo, pointwise, direct)

        def piece(i: int) -> None:
            bi, gi, r0, r1, m0, m1 = jobs[i]
            cols = full_cols.get((bi, gi)) if (r0, r1) == (0, ho) else None
            if cols is None:
                cols = self._cols(x3, src, bi, gi, cg, r0, r1, wo, pointwise, direct)
            dst = y3[bi, gi * mg + m0: gi * mg + m1, r0 * wo: r1 * wo]
            np.matmul(wmat[gi, m0:m1], cols, out=dst)
            if bias is not None:
                dst += bias[gi * mg + m0: gi * mg + m1]
            if epilogue is not None:
                epilogue(dst)

        parallel.run_chunks(piece, len(jobs), k)
        return y

    @staticmethod
    def _cols(x3, src, bi, gi, cg, r0, r1, wo, pointwise, direct) -> np.ndarray:
        """im2col columns of image ``bi``, group ``gi``, output rows ``r0:r1``: (cg * taps, (r1 - r0) * wo)."""
        if direct:
            return x3[bi, gi * cg:(gi + 1) * cg, r0 * wo: r1 * wo]
        part = src[bi, gi * cg:(gi + 1) * cg, r0:r1]
        if pointwise:
            return np.ascontiguousarray(part).reshape(cg, -1)
        return np.ascontiguousarray(part.transpose(0, 3, 4, 1, 2)).reshape(cg * src.shape[-2] * src.shape[-1], -1)

    def _dw_plan(self, xshape: tuple, wshape: tuple, dtype: np.dtype) -> "DepthwisePlan":
        """The :class:`DepthwisePlan` of a 1-D or 2-D depthwise convolution (cached per shape)."""
        key = ("dw", xshape, wshape, dtype)
        plan = self._plans.get(key)
        if plan is None:
            nd, kernel, strides, dil, begin, end, out, _, _ = self._plan(xshape, wshape)
            if nd == 1:  # as 2-D with one row
                kernel, strides, dil, out = [1] + kernel, [1] + strides, [1] + dil, [1] + out
                begin, end = [0] + begin, [0] + end
            hw = xshape[2:] if nd == 2 else (1,) + tuple(xshape[2:])
            dw = _depthwise()
            args = (xshape[0], xshape[1], wshape[0] // xshape[1], tuple(hw), tuple(kernel), tuple(strides),
                    tuple(dil), tuple(begin), tuple(end), tuple(out), np.dtype(dtype))
            # nodes of the same shapes and attributes in one compile share the geometry and scratch pool
            plan = shared(("depthwise", dw.MODE) + args, lambda: dw.DepthwisePlan(*args)).for_node()
            self._plans[key] = plan
        return plan

    def _warm_depthwise(self, node: NodeInfo) -> None:
        """Import ``_depthwise.py`` for a depthwise node, and with a static input shape plan the
        convolution at compile time and make its scratch buffers and weights (with the bias),
        so the first run does not pay for them."""
        xs, w = node.shape(0), self._w_const
        dt = node.dtype(0)
        if w is None or w.ndim not in (3, 4) or not (w.shape[1] == 1 and self.group > 1):
            return
        _depthwise()  # imported now (at compile), also when the input shape is only known at run time
        if xs is None or dt is None or np.dtype(dt) not in _FLOATS or w.dtype != dt:
            return
        if not all(isinstance(d, int) and d > 0 for d in xs) or len(xs) not in (3, 4) or len(w.shape) != len(xs):
            return
        if self.group != xs[1]:
            return
        try:
            out = self._plan(tuple(xs), tuple(w.shape))[6]
            if xs[0] * w.shape[0] * math.prod(out) <= TAP_LOOP_MAX:
                return  # the tap loop (no plan)
            plan = self._dw_plan(tuple(xs), tuple(w.shape), np.dtype(dt))
        except Exception:  # noqa: BLE001  (a bad node fails with its own error at run time)
            return
        b = self._b_const
        plan.weights(w, b if plan.mode in ("cols", "rows") and b is not None and b.dtype == w.dtype else None)
        plan.warm(min(parallel.CORES, plan.nblocks) if parallel.worth_splitting(plan.est_us) else 1)

    def _depthwise_flat(self, x: np.ndarray, w: np.ndarray, b: np.ndarray | None, out: list,
                        dest: np.ndarray | None, pending: list | None = None,
                        plan: "DepthwisePlan | None" = None) -> np.ndarray:
        """Depthwise 1-D/2-D convolution by :class:`DepthwisePlan` (pieces of channels, threads).
        When it splits over threads it takes the ``pending`` epilogue (a fused chain's per-value
        tails) and runs it on each piece (on one thread the caller runs it once on the whole output:
        fewer calls).  ``plan``: this input shape's, found by :meth:`_run` (else looked up and
        remembered for the next call)."""
        n, m = x.shape[0], w.shape[0]
        shape = (n, m) + tuple(out)
        if plan is None:
            plan = self._dw_plan(x.shape, w.shape, x.dtype)
            self._dwf[x.shape] = (x.dtype, w.shape, math.prod(shape), out, plan)
        if dest is not None and dest.dtype == x.dtype and dest.shape == shape and dest.flags.c_contiguous:
            y = dest
        else:
            y = np.empty(shape, x.dtype)
        if b is not None and b.shape != (m,):
            raise self.fail(f"bias B has shape {list(b.shape)}; expected [{m}]")
        x4 = x if x.ndim == 4 else x.reshape(x.shape[:2] + (1,) + x.shape[2:])
        us = plan.est_us + (parallel.work_us("tail", y.size) if pending else 0.0)
        k = parallel.split_threads(us)
        epi = pending.pop() if k > 1 and pending and plan.nblocks > 1 else None
        plan.run(x4, w, None if b is None else b.astype(x.dtype, copy=False), y, nthreads=k, epilogue=epi)
        return y

    def _depthwise(self, x, w, kernel, strides, dil, begin, end, out) -> np.ndarray:
        n, c = x.shape[:2]
        m = w.shape[0]
        mult = m // c
        if mult == 1 and c >= 64 and int(np.prod(out)) >= 512 and x.dtype == w.dtype and x.dtype.kind == "f":
            # many output pixels: im2col per channel and one batched BLAS product (C x (1 x taps) @ (taps x pixels))
            cols = _im2col(x, kernel, strides, dil, begin, end, out)
            return np.matmul(w.reshape(c, 1, -1), cols).reshape(n, m, -1)
        if mult == 1 and c >= 64:
            return self._depthwise_channels_last(x, w, kernel, strides, dil, begin, end, out)
        xp = pad_spatial(x, begin, end)
        if mult > 1:
            xp = xp[:, :, None]
            wk = w.reshape((1, c, mult) + (1,) * len(out) + tuple(kernel))
            y = np.zeros((n, c, mult) + tuple(out), dtype=np.result_type(x, w))
            lead = 3
        else:
            wk = w.reshape((1, c) + (1,) * len(out) + tuple(kernel))
            y = np.zeros((n, c) + tuple(out), dtype=np.result_type(x, w))
            lead = 2
        tmp = np.empty_like(y)
        for taps, sl in tap_slices(kernel, strides, dil, out, lead=lead):
            np.multiply(xp[sl], wk[(Ellipsis,) + taps], out=tmp)
            y += tmp
        return y.reshape(n, m, -1)

    def _depthwise_channels_last(self, x, w, kernel, strides, dil, begin, end, out) -> np.ndarray:
        """Many channels: one einsum over a strided window view of the input in
        (N, *spatial, C) layout, where the per-channel weights broadcast along
        the contiguous last axis (numpy's sum-of-products loop, no temporaries)."""
        n, c = x.shape[:2]
        nd = len(out)
        spatial = x.shape[2:]
        if any(b < 0 for b in begin) or any(e < 0 for e in end):
            x = pad_spatial(x, [min(b, 0) for b in begin], [min(e, 0) for e in end])
            spatial = x.shape[2:]
            begin = [max(b, 0) for b in begin]
            end = [max(e, 0) for e in end]
        xp = np.zeros((n,) + tuple(spatial[i] + begin[i] + end[i] for i in range(nd)) + (c,),
                      dtype=np.result_type(x, w))
        inner = (slice(None),) + tuple(slice(begin[i], begin[i] + spatial[i]) for i in range(nd))
        xp[inner] = np.moveaxis(x, 1, -1)
        key = ("wcl", id(w))
        wk = self._plans.get(key)
        if wk is None or wk[0] is not w:
            wk = (w, np.ascontiguousarray(np.moveaxis(w[:, 0], 0, -1), dtype=xp.dtype))  # (*kernel, C)
            self._plans[key] = wk
        st = xp.strides
        view = np.lib.stride_tricks.as_strided(
            xp, (n,) + tuple(out) + tuple(kernel) + (c,),
            (st[0],) + tuple(st[1 + i] * strides[i] for i in range(nd))
            + tuple(st[1 + i] * dil[i] for i in range(nd)) + (st[-1],), writeable=False)
        letters = "defghijklm"[: 2 * nd]
        sp, kk = letters[:nd], letters[nd:]
        y = np.einsum(f"n{sp}{kk}c,{kk}c->nc{sp}", view, wk[1])
        return np.ascontiguousarray(y).reshape(n, c, -1)
