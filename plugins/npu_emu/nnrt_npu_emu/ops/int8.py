"""Integer kernels of folded int8 groups: exact int32 accumulation computed
with the host's float GEMM, requantization to the output's scale/zero point
with saturation (what an int8 NPU datapath does)."""
from __future__ import annotations

import math

import numpy as np

from nnrt_npu_emu.ops.common import KERNELS, kernel

__all__ = ["F32_EXACT", "SPLIT", "MAX_K_CHUNKS", "centered", "requantize_into", "im2col", "split_weights", "k_chunks",
           "RAW_KERNELS"]

#: largest integer magnitude every float32 partial sum holds exactly
F32_EXACT = float(2 ** 24)
#: radix of the weight split of GEMMs whose float32 sums would not be exact
SPLIT = 16
#: data-movement kernels that may run on raw int8 data when the quantization of input and output agree
RAW_KERNELS = frozenset({"concat", "transpose", "slice", "split", "unary"})
_INT32 = (-2.0 ** 31, 2.0 ** 31 - 1)
#: at most this many ranges of K in an exact chunked GEMM (more: split weights instead)
MAX_K_CHUNKS = 8


def centered(q: np.ndarray, zero_point: float) -> np.ndarray:
    """``q - zero_point`` as float32 (exact: int8/uint8 minus a zero point fits 9 bits)."""
    c = q.astype(np.float32)
    if zero_point:
        c -= np.float32(zero_point)
    return c


def requantize_into(out: np.ndarray, acc: np.ndarray, mult, zero_point: int, lo: int, hi: int) -> None:
    """``out = clip(rint(acc * mult) + zero_point, lo, hi)``; ``acc`` (a float
    temporary) is overwritten."""
    if mult is not None:
        np.multiply(acc, mult, out=acc)
    np.rint(acc, out=acc)
    if zero_point:
        acc += zero_point
    np.clip(acc, lo, hi, out=acc)
    np.copyto(out, acc.reshape(out.shape), casting="unsafe")


def split_weights(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(high, low) float32 parts with ``w == SPLIT * high + low`` and |low| <= SPLIT / 2."""
    high = np.rint(w * np.float32(1.0 / SPLIT))
    low = w - high * np.float32(SPLIT)
    return high, low


def im2col(x: np.ndarray, k, strides, dil, group: int) -> tuple[np.ndarray, list[int]]:
    """(columns ``(N, G, Cg*prod(k), P)``, output spatial size) of a padded input."""
    sp = x.ndim - 2
    N, C = x.shape[:2]
    osz = [(x.shape[2 + i] - ((k[i] - 1) * dil[i] + 1)) // strides[i] + 1 for i in range(sp)]
    st = x.strides
    view = np.lib.stride_tricks.as_strided(
        x, (N, C, *k, *osz),
        (st[0], st[1], *[st[2 + i] * dil[i] for i in range(sp)], *[st[2 + i] * strides[i] for i in range(sp)]),
        writeable=False)
    K = C // group * math.prod(k)
    cols = np.ascontiguousarray(view).reshape(N, group, K, math.prod(osz))
    return cols, osz


def k_chunks(w_abs_k: np.ndarray, x_max: float) -> list[int] | None:
    """Bounds ``[0, k1, ..., K]`` of ranges of K in which every partial sum of
    every output channel stays below :data:`F32_EXACT` (``w_abs_k``: the
    centered integer weights' magnitudes, (channels, K); ``x_max``: the
    largest centered input magnitude), or None when more than
    :data:`MAX_K_CHUNKS` ranges would be needed."""
    K = w_abs_k.shape[1]
    cum = np.concatenate([np.zeros((w_abs_k.shape[0], 1)), np.cumsum(w_abs_k * float(x_max), axis=1)], axis=1)
    bounds = [0]
    while bounds[-1] < K and len(bounds) <= MAX_K_CHUNKS:
        k0 = bounds[-1]
        over = (cum[:, k0 + 1:] - cum[:, k0:k0 + 1]).max(axis=0, initial=0.0) >= F32_EXACT
        bounds.append(k0 + int(np.argmax(over)) if over.any() else K)
    return bounds if bounds[-1] == K else None


def _gemm(w: np.ndarray, cols: np.ndarray, mode: str, chunks: list[int] | None = None) -> np.ndarray:
    """The exact integer product ``w @ cols``: one float32 GEMM (``f32``: every
    partial sum fits 24 bits); for ``split``, float32 GEMMs over the ranges
    of K in ``chunks`` (each exact) summed in float64, or without them two on
    the split weights combined in float64; or one float64 GEMM (``f64``)."""
    if mode == "f32":
        return np.matmul(w, cols)
    if mode == "split" and chunks:
        acc = None
        for k0, k1 in zip(chunks[:-1], chunks[1:]):
            part = np.matmul(w[..., k0:k1], cols[..., k0:k1, :])
            if acc is None:
                acc = part.astype(np.float64)
            else:
                acc += part
        return acc
    if mode == "split":
        high, low = split_weights(w)
        acc = np.matmul(high, cols).astype(np.float64)
        acc *= SPLIT
        acc += np.matmul(low, cols)
        return acc
    return np.matmul(w.astype(np.float64), cols.astype(np.float64))


def _pad(x: np.ndarray, pads, fill: float) -> np.ndarray:
    """``x`` padded on its spatial axes by ``pads`` (begins then ends; a negative end crops)."""
    sp = x.ndim - 2
    if not any(pads):
        return x
    if any(p < 0 for p in pads[sp:]):
        x = x[(slice(None), slice(None)) + tuple(slice(0, x.shape[2 + i] + min(pads[sp + i], 0)) for i in range(sp))]
    begin = [int(p) for p in pads[:sp]]
    out = np.full(x.shape[:2] + tuple(x.shape[2 + i] + begin[i] + max(int(pads[sp + i]), 0) for i in range(sp)),
                  fill, x.dtype)
    out[(slice(None), slice(None)) + tuple(slice(begin[i], begin[i] + x.shape[2 + i]) for i in range(sp))] = x
    return out


def _accumulate(acc: np.ndarray, bias: np.ndarray | None, a: dict) -> np.ndarray:
    """The int32 accumulator: bias added, saturated when it could overflow."""
    if bias is not None:
        acc += bias.astype(acc.dtype)
    if a.get("saturate_acc"):
        np.clip(acc, *_INT32, out=acc)
    return acc


@kernel("qconv")
def _k_qconv(ins, outs, a):
    """ins: x (int8/uint8), w (int8), bias (int32 or None), multiplier (float32 per output channel)."""
    xq, wq, bias, mult = ins
    out = outs[0]
    x = _pad(centered(xq, a["xz"]), a["pads"], 0.0)
    w = centered(wq, 0)
    if a.get("wz_nonzero"):
        w -= np.asarray(a["wz"], np.float32).reshape((-1,) + (1,) * (w.ndim - 1))
    N, M, G = x.shape[0], w.shape[0], a["group"]
    k = list(w.shape[2:])
    if G == 1 and all(v == 1 for v in k) and all(s == 1 for s in a["strides"]):
        cols, osz = x.reshape(N, 1, x.shape[1], -1), list(x.shape[2:])
    else:
        cols, osz = im2col(x, k, a["strides"], a["dilations"], G)
    acc = _gemm(w.reshape(G, M // G, -1), cols, a["gemm"], a.get("k_chunks"))  # (N, G, Mg, P)
    acc = acc.reshape(N, M, -1)
    _accumulate(acc, None if bias is None else bias.reshape(1, M, 1), a)
    requantize_into(out, acc, mult.reshape(1, M, 1), a["yz"], a["lo"], a["hi"])


@kernel("qgemm")
def _k_qgemm(ins, outs, a):
    """ins: A (int8/uint8), B (int8, constant), bias (int32 or None), multiplier (float32 per column)."""
    aq, bq, bias, mult = ins
    A = centered(aq, a["az"])
    B = centered(bq, 0)
    if a.get("wz_nonzero"):
        wz = np.asarray(a["wz"], np.float32)
        B -= wz.reshape(-1, 1) if a.get("transB") else wz
    if a.get("transB"):
        B = B.T
    if a["gemm"] == "split":  # split the weights: (B^T A^T)^T
        acc = np.swapaxes(_gemm(B.T, np.swapaxes(A, -1, -2), "split", a.get("k_chunks")), -1, -2)
    else:
        acc = _gemm(A, B, a["gemm"])
    _accumulate(acc, bias, a)
    requantize_into(outs[0], acc, mult, a["yz"], a["lo"], a["hi"])


@kernel("qmaxpool")
def _k_qmaxpool(ins, outs, a):
    """Max pooling on the integers (max commutes with a positive rescale),
    then requantization when the output's parameters differ."""
    xq = ins[0]
    sp = xq.ndim - 2
    k, st, dil, osz = a["k"], a["strides"], a["dilations"], a["osz"]
    need = [(osz[i] - 1) * st[i] + (k[i] - 1) * dil[i] + 1 for i in range(sp)]
    pads = list(a["pads"][:sp]) + [need[i] - xq.shape[2 + i] - a["pads"][i] for i in range(sp)]
    x = _pad(xq, pads, np.iinfo(xq.dtype).min)
    best = None
    for off in np.ndindex(*k):
        idx = (slice(None), slice(None)) + tuple(
            slice(off[i] * dil[i], off[i] * dil[i] + (osz[i] - 1) * st[i] + 1, st[i]) for i in range(sp))
        best = x[idx].copy() if best is None else np.maximum(best, x[idx], out=best)
    if a.get("mult") is None:
        np.clip(best, a["lo"], a["hi"], out=best)
        np.copyto(outs[0], best, casting="unsafe")
        return
    acc = centered(best, a["xz"])
    requantize_into(outs[0], acc, np.float32(a["mult"]), a["yz"], a["lo"], a["hi"])


@kernel("qlinear")
def _k_qlinear(ins, outs, a):
    """An op linear in its inputs (concat, add, average pooling, data
    movement) on the integers rescaled to the output scale, then rounded,
    offset and saturated. ``raw``: the parameters agree, the data moves as is."""
    inner = KERNELS[a["inner"]]
    if a.get("raw"):
        inner(list(ins), outs, a["inner_attrs"])
        return
    args = []
    for x, (zp, ratio) in zip(ins, a["rescale"]):
        if zp is None:  # a float constant, already divided by the output scale
            args.append(x)
            continue
        c = centered(x, zp)
        if ratio != 1.0:
            c *= np.float32(ratio)
        args.append(c)
    tmp = [np.empty(o.shape, np.float32) for o in outs]
    inner(args, tmp, a["inner_attrs"])
    for o, t in zip(outs, tmp):
        requantize_into(o, t, None, a["yz"], a["lo"], a["hi"])
