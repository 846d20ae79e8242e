"""Shared helpers for ops with sliding windows (Conv, pools): padding and output sizes."""
from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np


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
