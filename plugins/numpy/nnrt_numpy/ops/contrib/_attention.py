"""Scaled dot-product attention core and the mask formats of ONNX Runtime's
Attention / MultiHeadAttention contrib operators."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..nn.softmax import softmax as row_softmax


def read_head_attrs(kernel: Any, node: Any) -> None:
    """Set ``num_heads``, ``unidirectional``, ``scale`` (None: 1/sqrt(head size))
    and ``filter_value`` on ``kernel`` from the attributes that Attention and
    MultiHeadAttention share; ``kernel.fail`` names what is wrong."""
    if node.attr("num_heads") is None:
        raise kernel.fail("the 'num_heads' attribute is required")
    kernel.num_heads = int(node.attr("num_heads"))
    if kernel.num_heads <= 0:
        raise kernel.fail("num_heads must be positive")
    kernel.unidirectional = bool(node.attr("unidirectional", 0))
    sc = node.attr("scale")
    kernel.scale = None if sc is None or float(sc) == 0.0 else float(sc)
    kernel.filter_value = float(node.attr("mask_filter_value", -10000.0))


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def split_heads(x: np.ndarray, n: int) -> np.ndarray:
    """(B, S, N*h) -> (B, N, S, h)."""
    b, s, hid = x.shape
    return x.reshape(b, s, n, hid // n).transpose(0, 2, 1, 3)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """(B, N, S, h) -> (B, S, N*h)."""
    b, n, s, h = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, n * h)


def key_mask(
    mask: np.ndarray | None, b: int, s: int, t: int, past: int, filter_value: float,
    fail: Callable[[str], Exception], allow_4d: bool = True,
) -> np.ndarray | None:
    """Additive mask (B, 1, S, T) from a mask_index / key_padding_mask, or None.

    Supported layouts: (B) key lengths (right padding), (2B) end and start
    positions (left padding), (B, T) raw 0/1, (B, S, T) raw 0/1 and
    (B, 1, max_S, max_S) Megatron-style."""
    if mask is None:
        return None
    m = np.asarray(mask)
    j = np.arange(t)
    if m.ndim == 1:
        if m.shape[0] == b:
            masked = j[None, :] >= m.astype(np.int64)[:, None]
        elif m.shape[0] == 2 * b:
            end, start = m[:b].astype(np.int64), m[b:].astype(np.int64)
            masked = (j[None, :] >= end[:, None]) | (j[None, :] < start[:, None])
        else:
            raise fail(f"1-D mask must have {b} or {2 * b} entries, got {m.shape[0]}")
        masked = masked[:, None, None, :]
    elif m.ndim == 2:
        if m.shape != (b, t):
            raise fail(f"2-D mask must have shape ({b}, {t}), got {m.shape}")
        masked = (m == 0)[:, None, None, :]
    elif m.ndim == 3:
        if m.shape != (b, s, t):
            raise fail(f"3-D mask must have shape ({b}, {s}, {t}), got {m.shape}")
        masked = (m == 0)[:, None, :, :]
    elif m.ndim == 4 and allow_4d:
        if m.shape[0] != b or m.shape[1] != 1 or m.shape[2] < past + s or m.shape[3] < t:
            raise fail(f"4-D mask of shape {m.shape} is too small for S={s}, T={t}")
        masked = (m[:, :, past:past + s, :t] == 0)
    else:
        raise fail(f"unsupported mask shape {m.shape}")
    return np.where(masked, np.float32(filter_value), np.float32(0))


def causal_mask(s: int, t: int, past: int) -> np.ndarray:
    """(S, T) booleans: True for the keys after each query's absolute position.

    ONNX Runtime sets those scores to the lowest float instead of adding the
    mask filter value, so a query whose visible keys are all padding still
    attends only to them; :func:`attend` does the same."""
    i = np.arange(s)[:, None] + past
    return np.arange(t)[None, :] > i


def attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, masks: list[np.ndarray | None],
           causal: np.ndarray | None = None) -> np.ndarray:
    """softmax(q k^T * scale + sum(masks)) v, all (B, N, ., .); the scores where
    ``causal`` (S, T) is True become the lowest float."""
    scores = np.matmul(q, np.swapaxes(k, -1, -2))
    np.multiply(scores, np.asarray(scale, dtype=scores.dtype), out=scores)  # (in place: a fresh array)
    for m in masks:
        if m is not None:
            m = m.astype(scores.dtype, copy=False)
            if np.broadcast_shapes(m.shape, scores.shape) == scores.shape:
                np.add(scores, m, out=scores)
            else:
                scores = scores + m
    if causal is not None:
        np.copyto(scores, np.finfo(scores.dtype).min, where=causal)
    return np.matmul(row_softmax(scores, scores.ndim - 1), v)
