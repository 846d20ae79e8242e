"""Shared helpers for ops with sliding windows (Conv, pools): padding and output sizes."""
from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from nnrt_core.plugin_api import current_control


def resolve_pads(
    auto_pad: str,
    in_shape: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads: Sequence[int] | None,
    ceil_mode: bool = False,
) -> tuple[list[int], list[int], list[int], list[int]]:
    """Return ``(pads_begin, pads_end, out_shape, extra_end)`` for the spatial dims.

    ``out_shape`` is the ONNX output size; ``extra_end`` is the additional end
    padding (beyond ``pads_end``) needed so that the partial windows produced by
    ``ceil_mode`` lie inside the padded input.
    """
    nd = len(in_shape)
    begin = [0] * nd
    end = [0] * nd
    out = [0] * nd
    extra = [0] * nd
    for i in range(nd):
        n, k, s, d = in_shape[i], kernel[i], strides[i], dilations[i]
        ek = (k - 1) * d + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-n // s)
            total = max(0, (o - 1) * s + ek - n)
            small, big = total // 2, total - total // 2
            begin[i], end[i] = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
        elif auto_pad == "VALID":
            o = (n - ek) // s + 1 if not ceil_mode else -(-(n - ek) // s) + 1
        else:
            if pads:
                begin[i], end[i] = int(pads[i]), int(pads[i + nd])
            span = n + begin[i] + end[i] - ek
            if ceil_mode:
                o = -(-span // s) + 1
                # the last window must start inside the input or the left padding
                if (o - 1) * s >= n + begin[i]:
                    o -= 1
            else:
                o = span // s + 1
        o = max(o, 0)
        out[i] = o
        need = (o - 1) * s + ek - (n + begin[i] + end[i]) if o > 0 else 0
        extra[i] = max(need, 0)
    return begin, end, out, extra


def window_misfit(spatial: Sequence[int], kernel: Sequence[int], dilations: Sequence[int],
                  begin: Sequence[int], end: Sequence[int]) -> str | None:
    """Why a kernel window does not fit the padded input (no output position:
    ONNX Runtime refuses it too), or ``None`` when it fits on every axis."""
    for i, (n, k, d, b, e) in enumerate(zip(spatial, kernel, dilations, begin, end)):
        window = (k - 1) * d + 1
        if n > 0 and window > n + b + e:
            return (f"kernel_shape[{i}] = {k} (dilation {d}: a window of {window}) is larger than "
                    f"spatial axis {i} of the input padded ({n} + pads {b}, {e} = {n + b + e}); "
                    f"the window must fit the padded input")
    return None


def pad_spatial(x: np.ndarray, begin: Sequence[int], end: Sequence[int], value: float = 0) -> np.ndarray:
    """Pad the trailing ``len(begin)`` dims of ``x`` with a constant (no copy when pads are 0).

    Negative pads crop."""
    if not any(begin) and not any(end):
        return x
    nd = len(begin)
    lead = x.ndim - nd
    crop = tuple([slice(None)] * lead + [slice(max(-b, 0), x.shape[lead + i] - max(-e, 0))
                                         for i, (b, e) in enumerate(zip(begin, end))])
    x = x[crop]
    b = [max(v, 0) for v in begin]
    e = [max(v, 0) for v in end]
    shape = x.shape[:lead] + tuple(x.shape[lead + i] + b[i] + e[i] for i in range(nd))
    out = np.full(shape, value, dtype=x.dtype)
    inner = tuple([slice(None)] * lead + [slice(b[i], b[i] + x.shape[lead + i]) for i in range(nd)])
    out[inner] = x
    return out


def tap_slices(
    kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int], out_shape: Sequence[int], lead: int = 2
):
    """Yield ``(kernel_index, slices)`` selecting, for every kernel tap, the strided
    input elements that this tap multiplies for all output positions."""
    nd = len(kernel)
    for taps in itertools.product(*[range(k) for k in kernel]):
        sl = [slice(None)] * lead
        for i in range(nd):
            start = taps[i] * dilations[i]
            sl.append(slice(start, start + (out_shape[i] - 1) * strides[i] + 1, strides[i]))
        yield taps, tuple(sl)


def window_view(
    xp: np.ndarray, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int], out_shape: Sequence[int]
) -> np.ndarray:
    """A strided view of shape ``xp.shape[:-nd] + out_shape + kernel`` over a padded input."""
    nd = len(kernel)
    lead = xp.ndim - nd
    st = xp.strides
    shape = xp.shape[:lead] + tuple(out_shape) + tuple(kernel)
    strides_ = st[:lead] + tuple(st[lead + i] * strides[i] for i in range(nd)) + tuple(
        st[lead + i] * dilations[i] for i in range(nd)
    )
    return np.lib.stride_tricks.as_strided(xp, shape, strides_, writeable=False)


def col2im_add(
    cols: np.ndarray, out: np.ndarray, kernel: Sequence[int], strides: Sequence[int],
    dilations: Sequence[int], in_shape: Sequence[int],
) -> None:
    """Scatter-add ``cols`` of shape ``(N, C, *kernel, *in_shape)`` into the
    padded output ``out`` (``(N, C, *full)``): the adjoint of :func:`window_view`."""
    for taps, sl in tap_slices(kernel, strides, dilations, in_shape):
        out[sl] += cols[(slice(None), slice(None)) + taps]


def window_reduce(
    xp: np.ndarray, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
    out_shape: Sequence[int], ufunc: np.ufunc,
) -> np.ndarray:
    """Reduce every window of the padded input with ``ufunc`` (max or add).

    Rectangular windows are separable, so the reduction runs one spatial axis at
    a time: ``sum(kernel)`` strided ufunc calls instead of ``prod(kernel)``."""
    nd = len(kernel)
    lead = xp.ndim - nd
    y = xp
    for ax in range(nd):
        k, s, d, o = kernel[ax], strides[ax], dilations[ax], out_shape[ax]
        acc = None
        for t in range(k):
            sl = [slice(None)] * y.ndim
            sl[lead + ax] = slice(t * d, t * d + (o - 1) * s + 1, s)
            v = y[tuple(sl)]
            if acc is None:
                acc = v.copy()
            else:
                ufunc(acc, v, out=acc)
        y = acc
    return y


def tap_ranges(n: int, k: int, s: int, d: int, b: int, o: int) -> list[tuple[int, int, int]]:
    """(first output, end output, first input) of each kernel tap along one
    axis of extent ``n`` (kernel ``k``, stride ``s``, dilation ``d``, ``b``
    padded before, ``o`` outputs): the outputs whose window meets the input
    at that tap."""
    taps = []
    for t in range(k):
        off = t * d - b  # input index of output i is i * s + off
        lo = 0 if off >= 0 else (-off + s - 1) // s
        hi = min(o, (n - 1 - off) // s + 1) if n - 1 - off >= 0 else 0
        if hi > lo:
            taps.append((lo, hi, off + lo * s))
    return taps


def pooled_reduce(
    x: np.ndarray, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
    begin: Sequence[int], out_shape: Sequence[int], ufunc: np.ufunc, identity: float,
    dtype: np.dtype | None = None, out: np.ndarray | None = None,
) -> np.ndarray:
    """Like :func:`window_reduce` over ``x`` padded with ``identity`` (``begin``
    before each spatial axis, as much as needed after), without building the
    padded copy: each kernel tap is reduced into the output positions whose
    window it hits inside ``x``.  Separable, one spatial axis at a time, and
    the taps are taken in the same order, so results equal the padded form.
    ``dtype``: the type the reduction computes and returns in (default
    ``x``'s); the result goes to ``out`` when it has that shape and type, and
    is otherwise always a new array."""
    nd = len(kernel)
    lead = x.ndim - nd
    dtype = x.dtype if dtype is None else np.dtype(dtype)
    axes = [ax for ax in range(nd) if not (kernel[ax] == 1 and strides[ax] == 1 and begin[ax] == 0
                                           and out_shape[ax] == x.shape[lead + ax])]
    comm = ufunc is np.maximum or ufunc is np.minimum
    y = x
    for ax in axes:
        s, o, a = strides[ax], out_shape[ax], lead + ax
        taps = tap_ranges(y.shape[a], kernel[ax], s, dilations[ax], begin[ax], o)
        shape = y.shape[:a] + (o,) + y.shape[a + 1:]
        pre = (slice(None),) * a

        def src(lo: int, hi: int, start: int, _y=y, _pre=pre, _s=s) -> np.ndarray:
            return _y[_pre + (slice(start, start + (hi - lo - 1) * _s + 1, _s),)]

        last = ax == axes[-1]
        acc = out if last and out is not None and out.shape == shape and out.dtype == dtype else np.empty(shape, dtype)
        # start from a tap that hits every output combined with a second one; for add
        # only taps 0 and 1 qualify (a + b == b + a, but the later sums keep their order)
        fi = next((i for i, (lo, hi, _) in enumerate(taps) if lo == 0 and hi == o), None)
        if fi is not None and len(taps) == 1:
            np.copyto(acc, src(*taps[0]))
            rest = []
        elif fi is not None and (comm or fi <= 1):
            pi = 1 if fi == 0 else 0
            lo, hi, start = taps[pi]
            f_start = taps[fi][2]
            ufunc(src(lo, hi, f_start + lo * s), src(lo, hi, start), out=acc[pre + (slice(lo, hi),)], dtype=dtype)
            if lo > 0:
                np.copyto(acc[pre + (slice(0, lo),)], src(0, lo, f_start))
            if hi < o:
                np.copyto(acc[pre + (slice(hi, o),)], src(hi, o, f_start + hi * s))
            rest = [t for i, t in enumerate(taps) if i not in (fi, pi)]
        else:
            acc.fill(identity)
            rest = taps
        watch = current_control() if len(rest) > 64 else None  # a long window: the run's stop checked per tap
        watch = watch if watch is not None and watch.watched else None
        for lo, hi, start in rest:
            if watch is not None and watch.stopped():
                raise watch.error(f"a pooling window of {kernel[ax]} taps on spatial axis {ax}")
            dst = acc[pre + (slice(lo, hi),)]
            ufunc(dst, src(lo, hi, start), out=dst, dtype=dtype)
        y = acc
    if y is not x:
        return y
    if out is not None and out.shape == x.shape and out.dtype == dtype:
        np.copyto(out, x)
        return out
    return x.astype(dtype)


def same_pool_2d(x: np.ndarray, kernel: Sequence[int], begin: Sequence[int], ufunc: np.ufunc) -> np.ndarray | None:
    """Stride-1, dilation-1 pooling whose output has the input's spatial size
    (``begin + end == kernel - 1`` on both axes) over the last two axes of a
    C-contiguous ``x``, padded with the identity of ``ufunc``: the same values,
    reduced in the same order (first axis, then the second, taps in order), as
    :func:`window_reduce` on the padded copy, without building the copy.

    Each axis is one ufunc call per extra tap over the whole flattened array
    (contiguous, so numpy's SIMD loops run over all channels at once; the
    positions whose window wraps into a neighbouring row or channel come out
    wrong), then the few rows / columns whose window reaches into the padding
    are recomputed from their valid taps.  Returns None when it does not apply."""
    if x.ndim < 3 or not x.flags.c_contiguous or len(kernel) != 2 or x.size == 0:
        return None
    h, w = x.shape[-2:]
    rows = x.size // (h * w)
    y = x.reshape(rows, h, w)
    for ax, (k, b) in enumerate(zip(kernel, begin)):
        if not 0 <= b <= k - 1:
            return None
        n = (h, w)[ax]
        if k == 1:
            continue
        step = w if ax == 0 else 1
        src = y.reshape(-1)
        size = src.size
        acc = np.empty_like(y)
        flat = acc.reshape(-1)
        lo, hi = b * step, size - (k - 1 - b) * step
        if hi > lo:
            dst = flat[lo:hi]
            for t in range(k):
                v = src[lo + (t - b) * step: hi + (t - b) * step]
                if t == 0:
                    continue
                if t == 1:
                    ufunc(src[lo - b * step: hi - b * step], v, out=dst)
                else:
                    ufunc(dst, v, out=dst)
        # rows / columns whose window reaches into the padding: only the taps inside
        for i in list(range(min(b, n))) + list(range(max(n - (k - 1 - b), b), n)):
            taps = [i - b + t for t in range(k) if 0 <= i - b + t < n]
            sel = (lambda j: (slice(None), j, slice(None))) if ax == 0 else (lambda j: (slice(None), slice(None), j))
            dst = acc[sel(i)]
            if len(taps) == 1:
                dst[...] = y[sel(taps[0])]
                continue
            ufunc(y[sel(taps[0])], y[sel(taps[1])], out=dst)
            for j in taps[2:]:
                ufunc(dst, y[sel(j)], out=dst)
        y = acc
    if y.base is x or y is x:
        y = y.copy()
    return y.reshape(x.shape)
