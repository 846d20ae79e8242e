"""Host kernels of the sliding-window ops: N-d convolution as im2col + BLAS
GEMM batched over the groups (depthwise as one batched per-channel product,
or an einsum over a channels-last window view for small outputs; 2-D fp32
ones on the NumPy backend's kernel in the same family, :mod:`hostdw`) and pooling
one spatial axis at a time, one vectorised pass per tap of that axis.  No
Python loop runs per channel or pixel.

Inputs may be in a narrower storage type (fp16): the widening to the compute
type happens inside the padding / im2col copy, not in a separate pass."""
from __future__ import annotations

import functools
import itertools
import math
import threading
from typing import Callable, Sequence

import numpy as np

from nnrt_core.errors import MemoryBudgetError
from nnrt_core.plugin_api import current_control, tensor_limit
from nnrt_numpy.host_kernels import pooled_reduce  # the NumPy backend's separable pools (same taps, same order)
from nnrt_numpy.host_kernels import run_chunks  # the process's one pool of helper threads (public API)
from nnrt_npu_emu.ops.hostdw import depthwise_2d

__all__ = ["conv_nd", "pool_nd", "pad_crop", "conv_output_size", "COLS_CHUNK_BYTES", "PIECE_MACS", "MAX_PIECES",
           "SCRATCH_BYTES",
           "DEPTHWISE_MATMUL_PIXELS"]

#: im2col columns larger than this are built and multiplied in ranges of output rows (cache-sized pieces)
COLS_CHUNK_BYTES = 16 << 20
#: multiply-adds per piece of a convolution's GEMM (pieces for idle host threads)
PIECE_MACS = 16_000_000
#: at most this many pieces for threads: more, thinner GEMMs each pack all weights again (a 512 x 4608
#: weight matrix per row of 28 pixels ran at half the speed of one GEMM)
MAX_PIECES = 4
#: a piece of output rows spans at least this many pixels (a thin GEMM packs its weights for few columns)
MIN_PIECE_PIXELS = 256


def pad_crop(x: np.ndarray, begin: Sequence[int], end: Sequence[int], value: float = 0.0,
             dtype: np.dtype | None = None) -> np.ndarray:
    """Pad (positive) or crop (negative) the spatial axes of an NC... tensor,
    converted to ``dtype`` in the same copy (no copy when nothing changes)."""
    dt = np.dtype(dtype) if dtype is not None else x.dtype
    sp = len(begin)
    if any(b < 0 for b in begin) or any(e < 0 for e in end):
        x = x[(slice(None), slice(None)) + tuple(
            slice(max(-b, 0), x.shape[2 + i] - max(-e, 0)) for i, (b, e) in enumerate(zip(begin, end)))]
    b = [max(int(v), 0) for v in begin]
    e = [max(int(v), 0) for v in end]
    if not any(b) and not any(e):
        return x if x.dtype == dt else x.astype(dt)
    shape = x.shape[:2] + tuple(x.shape[2 + i] + b[i] + e[i] for i in range(sp))
    size = math.prod(shape) * dt.itemsize
    if size > tensor_limit():  # a host copy of the emulator: the run's memory budget applies
        raise MemoryBudgetError(f"the padded copy {list(shape)} ({dt}) of a window op needs {size} bytes, over "
                                f"the memory budget of {tensor_limit()} bytes (ScheduleConfig.max_tensor_bytes)")
    out = np.full(shape, value, dtype=dt)
    out[(slice(None), slice(None)) + tuple(slice(b[i], b[i] + x.shape[2 + i]) for i in range(sp))] = x
    return out


def conv_output_size(padded: Sequence[int], k: Sequence[int], strides: Sequence[int],
                     dil: Sequence[int]) -> list[int]:
    """Output extent per spatial axis of a window op over a padded input."""
    return [(padded[i] - ((k[i] - 1) * dil[i] + 1)) // strides[i] + 1 for i in range(len(k))]


def _tap_slice(tap: Sequence[int], strides, dil, osz, lead: int = 2) -> tuple:
    """Index of the input elements kernel tap ``tap`` meets, for every output position."""
    return (slice(None),) * lead + tuple(
        slice(tap[i] * dil[i], tap[i] * dil[i] + (osz[i] - 1) * strides[i] + 1, strides[i]) for i in range(len(osz)))


def _taps(k: Sequence[int]):
    return itertools.product(*(range(int(v)) for v in k))


def _dilate(x: np.ndarray, lhs: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """Insert ``lhs - 1`` zeros between input elements (transposed convolution)."""
    sp = x.ndim - 2
    size = [(x.shape[2 + i] - 1) * lhs[i] + 1 for i in range(sp)]
    xz = np.zeros(x.shape[:2] + tuple(size), dtype=dtype)
    xz[(slice(None), slice(None)) + tuple(slice(None, None, v) for v in lhs)] = x
    return xz


def _columns(xp: np.ndarray, k, strides, dil, osz, rows: slice | None = None) -> np.ndarray:
    """im2col of padded ``xp``: contiguous (N, C * taps, pixels), rows ordered (channel, tap)
    like the weights; ``rows`` restricts the first output axis."""
    sp = len(k)
    N, C = xp.shape[:2]
    if all(v == 1 for v in k):
        v = xp[_tap_slice([0] * sp, strides, dil, osz)]
        if rows is not None:
            v = v[:, :, rows]
        return np.ascontiguousarray(v).reshape(N, C, -1)
    eff = [(k[i] - 1) * dil[i] + 1 for i in range(sp)]
    win = np.lib.stride_tricks.sliding_window_view(xp, eff, axis=tuple(range(2, 2 + sp)))
    win = win[(slice(None), slice(None)) + tuple(slice(0, (osz[i] - 1) * strides[i] + 1, strides[i])
                                                  for i in range(sp)) + tuple(slice(None, None, d) for d in dil)]
    if rows is not None:
        win = win[:, :, rows]
    perm = (0, 1) + tuple(range(2 + sp, 2 + 2 * sp)) + tuple(range(2, 2 + sp))
    return np.ascontiguousarray(win.transpose(perm)).reshape(N, C * math.prod(k), -1)


def _depthwise_into(xp: np.ndarray, w: np.ndarray, k, strides, dil, osz, out: np.ndarray) -> None:
    """One input channel per group: ``out`` (N, M, *osz) accumulated by a
    multiply-add over all channels per kernel tap."""
    N, C = xp.shape[:2]
    mult = w.shape[0] // C
    sp = len(k)
    wk = w.reshape((1, C, mult) + (1,) * sp + tuple(k))
    y = out.reshape((N, C, mult) + tuple(osz))
    y.fill(0)
    tmp = np.empty_like(y)
    src = xp[:, :, None]
    for tap in _taps(k):
        np.multiply(src[_tap_slice(tap, strides, dil, osz, lead=3)], wk[(Ellipsis,) + tap], out=tmp)
        y += tmp


def _depthwise_channels_last(x: np.ndarray, w: np.ndarray, k, strides, pads, dil, out: np.ndarray) -> None:
    """Depthwise convolution (one filter per channel) as one einsum over a
    window view of the padded input in (N, *spatial, C) layout: the filter
    taps are summed in the same order as :func:`_depthwise_into`, with the
    channel the contiguous inner axis and no temporaries."""
    sp = len(k)
    N, C = x.shape[:2]
    x = pad_crop(x, [min(p, 0) for p in pads[:sp]], [min(p, 0) for p in pads[sp:]])  # negative pads crop
    begin, end = [max(p, 0) for p in pads[:sp]], [max(p, 0) for p in pads[sp:]]
    xl = np.zeros((N,) + tuple(x.shape[2 + i] + begin[i] + end[i] for i in range(sp)) + (C,), w.dtype)
    xl[(slice(None),) + tuple(slice(begin[i], begin[i] + x.shape[2 + i]) for i in range(sp))] = np.moveaxis(x, 1, -1)
    osz = out.shape[2:]
    st = xl.strides
    view = np.lib.stride_tricks.as_strided(
        xl, (N,) + tuple(osz) + tuple(k) + (C,),
        (st[0],) + tuple(st[1 + i] * strides[i] for i in range(sp)) + tuple(st[1 + i] * dil[i] for i in range(sp))
        + (st[-1],), writeable=False)
    wk = np.ascontiguousarray(np.moveaxis(w[:, 0], 0, -1))  # (*k, C)
    sub, taps = "pqrstu"[:sp], "ghijkl"[:sp]
    np.copyto(out, np.moveaxis(np.einsum(f"n{sub}{taps}c,{taps}c->n{sub}c", view, wk), -1, 1))


def _ranges(n: int, parts: int) -> list[slice]:
    """``range(n)`` cut into ``parts`` contiguous, nearly equal slices."""
    parts = max(1, min(n, parts))
    step = -(-n // parts)
    return [slice(i, min(n, i + step)) for i in range(0, n, step)]


def _run(piece: Callable[[int], None], n: int) -> None:
    """``piece(i)`` for ``i < n``: on the idle threads when there are several
    (:func:`run_chunks`), directly when one (no look at the load)."""
    if n == 1:
        piece(0)
    else:
        run_chunks(piece, n)


def _gemm_into(wm: np.ndarray, xp: np.ndarray, k, strides, dil, osz, y: np.ndarray, bias: np.ndarray | None = None,
               post: Callable | None = None) -> None:
    """``y`` (N, G, Mg, pixels) = weights (G, Mg, K) x im2col columns of ``xp``
    (one batched product over the groups), plus ``bias`` (G, Mg, 1).

    The product is cut into pieces (ranges of output rows, each building its
    own cache-sized columns; or ranges of output channels when there are
    fewer pixels than channels) that run on the threads
    :func:`nnrt_numpy.parallel.run_chunks` finds idle.  The cut depends on the
    shapes only, so results do not depend on the machine's load.  ``post(sel)``
    is called on each finished range of channels (contiguous: ``sel`` maps an
    array of ``y``'s size to the piece) while it is in cache, or ``post()``
    once at the end when the pieces are ranges of rows."""
    N, G, Mg, P = y.shape
    K = wm.shape[-1]
    want = min(MAX_PIECES, max(1, N * G * Mg * K * P // PIECE_MACS))
    if P < Mg or osz[0] == 1:  # few pixels: ranges of output channels share one set of columns
        cols = _columns(xp, k, strides, dil, osz).reshape(N, G, K, P)
        parts = min(want, Mg // 64)
        if parts <= 1:  # one piece per image, all groups in one batched product (as many 2-D GEMMs), one store
            jobs = list(range(N))

            def piece(i: int) -> None:
                np.matmul(wm, cols[i], out=y[i])
                if bias is not None:
                    y[i] += bias
                if post is not None:
                    post(lambda a: a.reshape(N, G * Mg * P)[i])
            _run(piece, N)
            return
        jobs = [(n, g, ms) for n in range(N) for g in range(G) for ms in _ranges(Mg, parts)]

        def piece(i: int) -> None:
            n, g, ms = jobs[i]
            dst = y[n, g, ms]
            np.matmul(wm[g, ms], cols[n, g], out=dst)
            if bias is not None:
                dst += bias[g, ms]
            if post is not None:
                post(lambda a: a.reshape(N, G, Mg, P)[n, g, ms])
    else:
        row = P // osz[0]
        nbytes = N * G * K * P * xp.dtype.itemsize
        jobs = _ranges(osz[0], max(min(want, P // MIN_PIECE_PIXELS), -(-nbytes // COLS_CHUNK_BYTES)))

        def piece(i: int) -> None:
            rs = jobs[i]
            px = slice(rs.start * row, rs.stop * row)
            cols = _columns(xp, k, strides, dil, osz, rs).reshape(N, G, K, -1)
            for n in range(N):
                dst = y[n, :, :, px]
                np.matmul(wm[0] if G == 1 else wm, cols[n, 0] if G == 1 else cols[n], out=dst[0] if G == 1 else dst)
    _run(piece, len(jobs))
    if not (P < Mg or osz[0] == 1):  # ranges of rows are strided pieces of ``y``: numpy's passes over them are slow
        if bias is not None:
            y += bias
        if post is not None:
            post()


#: bytes of pooled depthwise scratch (padded input + im2col columns) kept between runs
SCRATCH_BYTES = 64 << 20
_scratch: dict[tuple, list[tuple[np.ndarray, np.ndarray]]] = {}
_scratch_bytes = [0]
_scratch_lock = threading.Lock()


def _take_scratch(key: tuple, padded: tuple, cols: tuple, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """A (padded input, columns) pair for ``key`` from the pool, or new ones
    (the padded input zeroed: only its interior is ever written)."""
    with _scratch_lock:
        free = _scratch.get(key)
        if free:
            pair = free.pop()
            _scratch_bytes[0] -= pair[0].nbytes + pair[1].nbytes
            return pair
    return np.zeros(padded, dtype), np.empty(cols, dtype)


def _give_scratch(key: tuple, pair: tuple[np.ndarray, np.ndarray]) -> None:
    with _scratch_lock:
        size = pair[0].nbytes + pair[1].nbytes
        if _scratch_bytes[0] + size <= SCRATCH_BYTES:
            _scratch.setdefault(key, []).append(pair)
            _scratch_bytes[0] += size


def _depthwise_matmul(x: np.ndarray, w: np.ndarray, k, strides, pads, dil, osz, y: np.ndarray) -> None:
    """Depthwise convolution (one filter per channel) as one batched product:
    per channel its (1, taps) filter times its (taps, pixels) im2col columns,
    built in pooled scratch (no allocation, no first-touch page faults per
    run; the same columns and product as a fresh im2col)."""
    sp = len(k)
    N, C = x.shape[:2]
    taps = math.prod(k)
    ct = w.dtype
    if any(p < 0 for p in pads):  # negative pads crop: a fresh copy
        cols = _columns(pad_crop(x, list(pads[:sp]), list(pads[sp:]), 0.0, ct), k, strides, dil, osz)
        np.matmul(w.reshape(C, 1, taps), cols.reshape(N, C, taps, -1), out=y.reshape(N, C, 1, -1))
        return
    padded = x.shape[:2] + tuple(x.shape[2 + i] + pads[i] + pads[sp + i] for i in range(sp))
    cshape = (N, C) + tuple(k) + tuple(osz)
    key = (padded, cshape, tuple(strides), tuple(dil), tuple(pads), ct.str)
    xp, cols = _take_scratch(key, padded, cshape, ct)
    try:
        xp[(slice(None), slice(None)) + tuple(slice(pads[i], pads[i] + x.shape[2 + i]) for i in range(sp))] = x
        eff = [(k[i] - 1) * dil[i] + 1 for i in range(sp)]
        win = np.lib.stride_tricks.sliding_window_view(xp, eff, axis=tuple(range(2, 2 + sp)))
        win = win[(slice(None), slice(None)) + tuple(slice(0, (osz[i] - 1) * strides[i] + 1, strides[i])
                                                      for i in range(sp)) + tuple(slice(None, None, d) for d in dil)]
        np.copyto(cols, win.transpose((0, 1) + tuple(range(2 + sp, 2 + 2 * sp)) + tuple(range(2, 2 + sp))))
        np.matmul(w.reshape(C, 1, taps), cols.reshape(N, C, taps, -1), out=y.reshape(N, C, 1, -1))
    finally:
        _give_scratch(key, (xp, cols))


#: depthwise convolutions with at least this many output pixels use :func:`_depthwise_matmul`
DEPTHWISE_MATMUL_PIXELS = 512


def conv_nd(x: np.ndarray, w: np.ndarray, strides, pads, dil, group: int, lhs_dilation=None,
            out: np.ndarray | None = None, bias: np.ndarray | None = None, post: Callable | None = None) -> np.ndarray:
    """N-d grouped convolution of ``x`` (N, C, ...) with ``w`` (M, C/group, *k), plus ``bias`` (M,).

    Computes in ``w``'s float type (at least fp32: fp16 storage widens; the
    int8 kernels pass exact integers in fp64).  The result (N, M, *out) is
    written into ``out`` when it has that shape and type, else returned new.
    ``post(sel)``: called on finished pieces of ``out`` (``sel`` maps an array
    of ``out``'s shape to the piece) or once with no argument for all of it;
    needs ``out`` (C-contiguous, the result's shape and type)."""
    ct = np.result_type(w.dtype, np.float32)
    w = w.astype(ct, copy=False)
    sp = x.ndim - 2
    if lhs_dilation and any(v > 1 for v in lhs_dilation):
        x = _dilate(x, lhs_dilation, ct)
    N, C = x.shape[:2]
    M, k = w.shape[0], [int(v) for v in w.shape[2:]]
    osz = conv_output_size([x.shape[2 + i] + pads[i] + pads[sp + i] for i in range(sp)], k, strides, dil)
    G = int(group)
    shape = (N, M) + tuple(osz)
    direct = out is not None and out.shape == shape and out.dtype == ct and out.flags.c_contiguous
    if post is not None and not direct:
        raise ValueError("conv_nd: a store epilogue needs the output array")
    y = out if direct else np.empty(shape, ct)
    bias = None if bias is None else bias.astype(ct, copy=False).reshape(-1)
    depthwise = w.shape[1] == 1 and G == C and G > 1
    pixels = math.prod(osz)
    if depthwise and M == C and depthwise_2d(x, w, strides, pads, dil, osz, y,
                                             "cl" if pixels < DEPTHWISE_MATMUL_PIXELS else "cols"):
        pass  # the NumPy backend's host kernel in the same family as the two below: same bits (see hostdw)
    elif depthwise and M == C and 0 < pixels < DEPTHWISE_MATMUL_PIXELS:
        _depthwise_channels_last(x, w, k, strides, list(pads), dil, y)
    elif depthwise and M == C:
        _depthwise_matmul(x, w, k, strides, list(pads), dil, osz, y)
    elif depthwise:
        _depthwise_into(pad_crop(x, list(pads[:sp]), list(pads[sp:]), 0.0, ct), w, k, strides, dil, osz, y)
    else:
        xp = pad_crop(x, list(pads[:sp]), list(pads[sp:]), 0.0, ct)
        wm = np.ascontiguousarray(w.reshape(G, M // G, -1))
        _gemm_into(wm, xp, k, strides, dil, osz, y.reshape(N, G, M // G, pixels),
                   None if bias is None else bias.reshape(G, M // G, 1), post)
        return y
    if bias is not None:
        y += bias.reshape((1, -1) + (1,) * sp)
    if post is not None:
        post()
    return y


@functools.lru_cache(maxsize=512)
def _pool_counts(shape, k, strides, dil, osz, begin, end, explicit_end, include_pad: bool) -> np.ndarray:
    """Elements each average-pool window divides by (1, 1, *out); tuple
    arguments, cached (a layer divides by the same counts at every run), read-only."""
    sp = len(k)
    mask = np.ones((1, 1) + tuple(shape), np.float32)
    if include_pad:  # explicit padding counts, the extra end rows of ceil mode do not
        inner_end = [min(e, pe) for e, pe in zip(end, explicit_end)]
        mask = pad_crop(mask, begin, inner_end, 1.0)
        mask = pad_crop(mask, [0] * sp, [end[i] - inner_end[i] for i in range(sp)], 0.0)
    else:
        mask = pad_crop(mask, begin, end, 0.0)
    cnt = np.zeros((1, 1) + tuple(osz), np.float32)
    watch = current_control()
    watch = watch if watch is not None and watch.watched else None
    for tap in _taps(k):
        if watch is not None and watch.stopped():
            raise watch.error(f"the divisors of an average pool of kernel {list(k)}")
        cnt += mask[_tap_slice(tap, strides, dil, osz)]
    cnt = np.maximum(cnt, 1.0)
    cnt.flags.writeable = False
    return cnt


def _global(x: np.ndarray, k, strides, pads, dil, osz) -> bool:
    """Whether one window covers the whole spatial extent (a global pool)."""
    return all(o == 1 for o in osz) and not any(pads) and all(d == 1 for d in dil) \
        and list(k) == list(x.shape[2:])


def pool_nd(x: np.ndarray, kind: str, k, strides, pads, dil, osz, count_include_pad: bool,
            out: np.ndarray | None = None) -> np.ndarray:
    """Max pooling in ``x``'s own type (exact: the result is one of the inputs)
    or average pooling with fp32 sums, separable: one vectorised pass per
    kernel tap of each spatial axis in turn, taps outside the input skipped
    (no padded copy); a window covering the whole input is one reduction.
    Average sums go into ``out`` when it is a float32 array of the result's shape."""
    sp = len(k)
    shape = x.shape[2:]
    begin = list(pads[:sp])
    need = [(osz[i] - 1) * strides[i] + (k[i] - 1) * dil[i] + 1 for i in range(sp)]
    end = [need[i] - shape[i] - begin[i] for i in range(sp)]
    oshape = x.shape[:2] + tuple(osz)
    if kind == "max":
        if _global(x, k, strides, pads, dil, osz):
            return np.maximum.reduce(x.reshape(x.shape[:2] + (-1,)), axis=-1).reshape(oshape)
        fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        return pooled_reduce(x, k, strides, dil, begin, osz, np.maximum, fill, x.dtype)
    f32 = np.dtype(np.float32)
    y = out if out is not None and out.dtype == f32 and out.shape == oshape else None
    if _global(x, k, strides, pads, dil, osz):
        if y is None:
            y = np.empty(oshape, f32)
        np.add.reduce(x.reshape(x.shape[:2] + (-1,)), axis=-1, dtype=f32, out=y[(Ellipsis,) + (0,) * sp])
    else:
        y = pooled_reduce(x, k, strides, dil, begin, osz, np.add, 0.0, f32, y)
    y /= _pool_counts(tuple(shape), tuple(k), tuple(strides), tuple(dil), tuple(osz), tuple(begin), tuple(end),
                      tuple(pads[sp:]), bool(count_include_pad))
    return y
