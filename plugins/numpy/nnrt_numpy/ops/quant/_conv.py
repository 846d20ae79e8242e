"""A small vectorized N-D convolution (im2col + batched matmul) used by the
quantized and fused convolution kernels.  Works in the dtype of its inputs:
callers pass float64 for exact integer convolutions (8-bit products summed
over a kernel window stay far below 2**53)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from nnrt_numpy.kernel import NodeInfo

__all__ = ["ConvAttrs", "parse_conv_attrs", "conv_nd"]

_AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


@dataclass(frozen=True)
class ConvAttrs:
    auto_pad: str
    dilations: tuple[int, ...] | None
    group: int
    kernel_shape: tuple[int, ...] | None
    pads: tuple[int, ...] | None
    strides: tuple[int, ...] | None


def parse_conv_attrs(node: NodeInfo, fail: Callable[[str], Exception]) -> ConvAttrs:
    """Read and validate the Conv attribute family of ``node``."""
    auto_pad = node.attr("auto_pad", "NOTSET")
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode()
    if auto_pad not in _AUTO_PADS:
        raise fail(f"auto_pad must be one of {_AUTO_PADS}, got {auto_pad!r}")
    group = int(node.attr("group", 1))
    if group < 1:
        raise fail(f"group must be >= 1, got {group}")

    def ints(name: str) -> tuple[int, ...] | None:
        v = node.attr(name)
        return None if v is None else tuple(int(i) for i in v)

    attrs = ConvAttrs(auto_pad, ints("dilations"), group, ints("kernel_shape"), ints("pads"), ints("strides"))
    for name in ("dilations", "strides", "kernel_shape"):
        v = getattr(attrs, name)
        if v is not None and any(i < 1 for i in v):
            raise fail(f"{name} must be positive, got {list(v)}")
    if attrs.pads is not None:
        if len(attrs.pads) % 2:
            raise fail(f"pads must have an even length, got {list(attrs.pads)}")
        if any(p < 0 for p in attrs.pads):
            raise fail(f"negative pads are not supported: {list(attrs.pads)}")
        if auto_pad != "NOTSET" and any(attrs.pads):
            raise fail("pads cannot be used together with auto_pad")
    return attrs


def conv_nd(x: np.ndarray, w: np.ndarray, a: ConvAttrs, fail: Callable[[str], Exception]) -> np.ndarray:
    """Cross-correlate ``x`` (N, C, *S) with ``w`` (M, C/group, *K); no bias."""
    if x.ndim < 3 or w.ndim != x.ndim:
        raise fail(f"conv input rank {x.ndim} and weight rank {w.ndim} must match and be >= 3")
    nsp = x.ndim - 2
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    ksz = tuple(w.shape[2:])
    g = a.group
    if a.kernel_shape is not None and tuple(a.kernel_shape) != ksz:
        raise fail(f"kernel_shape {list(a.kernel_shape)} does not match weight shape {w.shape}")
    if cg * g != c:
        raise fail(f"input channels {c} != weight channels {cg} x group {g}")
    if m % g:
        raise fail(f"output channels {m} not divisible by group {g}")
    strides = a.strides or (1,) * nsp
    dil = a.dilations or (1,) * nsp
    if len(strides) != nsp or len(dil) != nsp:
        raise fail(f"strides/dilations must have {nsp} entries")
    spatial = x.shape[2:]
    ext = tuple((k - 1) * d + 1 for k, d in zip(ksz, dil))
    if a.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for i in range(nsp):
            out = -(-spatial[i] // strides[i])
            total = max((out - 1) * strides[i] + ext[i] - spatial[i], 0)
            small = total // 2
            b = small if a.auto_pad == "SAME_UPPER" else total - small
            begin.append(b)
            end.append(total - b)
    elif a.auto_pad == "VALID" or a.pads is None:
        begin, end = [0] * nsp, [0] * nsp
    else:
        if len(a.pads) != 2 * nsp:
            raise fail(f"pads must have {2 * nsp} entries, got {len(a.pads)}")
        begin, end = list(a.pads[:nsp]), list(a.pads[nsp:])
    if any(begin) or any(end):
        x = np.pad(x, [(0, 0), (0, 0)] + list(zip(begin, end)))
    for i in range(nsp):
        if x.shape[2 + i] < ext[i]:
            raise fail(f"kernel extent {ext[i]} exceeds padded input size {x.shape[2 + i]} on spatial axis {i}")
    axes = tuple(range(2, 2 + nsp))
    win = sliding_window_view(x, ext, axis=axes)  # (N, C, *O_full, *E)
    win = win[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides)
              + tuple(slice(None, None, d) for d in dil)]  # (N, C, *O, *K)
    out_sp = win.shape[2:2 + nsp]
    kk = int(np.prod(ksz, dtype=np.int64))
    p = int(np.prod(out_sp, dtype=np.int64))
    win = win.reshape((n, g, cg) + out_sp + ksz)
    perm = (0, 1) + tuple(range(3, 3 + nsp)) + (2,) + tuple(range(3 + nsp, 3 + 2 * nsp))
    cols = win.transpose(perm).reshape(n, g, p, cg * kk)
    wm = w.reshape(g, m // g, cg * kk).transpose(0, 2, 1)
    y = np.matmul(cols, wm[None])  # (N, G, P, M/G)
    return y.transpose(0, 1, 3, 2).reshape((n, m) + out_sp)
