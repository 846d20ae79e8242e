"""RotaryEmbedding (com.microsoft, version 1): rotary position embedding of a
(B, S, H) or (B, N, S, h) tensor from cos/sin caches, with explicit
``position_ids`` (B, S) or a scalar start offset, half-split or
``interleaved`` rotation and partial rotation (``rotary_embedding_dim``)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._util import MS


@register
class RotaryEmbedding(Kernel):
    op_type = "RotaryEmbedding"
    domain = MS
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.interleaved = bool(node.attr("interleaved", 0))
        self.num_heads = int(node.attr("num_heads", 0))
        self.rot_dim = int(node.attr("rotary_embedding_dim", 0))
        self.scale = float(node.attr("scale", 1.0))
        if int(node.attr("is_packed_batching", 0)):
            raise self.fail("is_packed_batching is not supported")

    @classmethod
    def _check(cls, node: NodeInfo) -> str | None:
        if int(node.attr("is_packed_batching", 0) or 0):
            return "RotaryEmbedding with is_packed_batching=1 is not supported"
        return None

    def __call__(self, x, position_ids, cos_cache, sin_cache) -> Sequence[Any]:
        x = np.asarray(x)
        cos_cache = np.asarray(cos_cache)
        sin_cache = np.asarray(sin_cache)
        half = cos_cache.shape[-1]
        if x.ndim == 4:
            b, n, s, h = x.shape
            xs = x.transpose(0, 2, 1, 3)  # (B, S, N, h)
        elif x.ndim == 3:
            b, s, hid = x.shape
            if self.num_heads:
                n = self.num_heads
            else:
                n = hid // (2 * half) if not self.rot_dim else 0
            if n <= 0 or hid % n:
                raise self.fail("num_heads is required for 3-D input with partial rotation, and must divide the hidden size")
            h = hid // n
            xs = x.reshape(b, s, n, h)
        else:
            raise self.fail(f"input must be 3-D or 4-D, got {x.shape}")
        rot = self.rot_dim or h
        if rot > h or rot % 2 or half * 2 != rot:
            raise self.fail(f"cos/sin cache width {half} does not match rotary dimension {rot} (head size {h})")
        pos = np.asarray(position_ids).astype(np.int64)
        if pos.size == 1 and pos.ndim <= 1:
            pos = int(pos.reshape(())) + np.arange(s)[None, :].repeat(b, axis=0)
        elif pos.shape != (b, s):
            raise self.fail(f"position_ids must have shape (1) or ({b}, {s}), got {pos.shape}")
        if pos.size and (pos.min() < 0 or pos.max() >= cos_cache.shape[0]):
            raise self.fail("position_ids out of range of the cos/sin cache")
        comp = np.float64 if x.dtype == np.float64 else np.float32
        cos = cos_cache.astype(comp)[pos][:, :, None, :]  # (B, S, 1, half)
        sin = sin_cache.astype(comp)[pos][:, :, None, :]
        xf = xs.astype(comp)
        out = xf.copy()
        if self.interleaved:
            x1, x2 = xf[..., 0:rot:2], xf[..., 1:rot:2]
            out[..., 0:rot:2] = x1 * cos - x2 * sin
            out[..., 1:rot:2] = x2 * cos + x1 * sin
        else:
            x1, x2 = xf[..., :half], xf[..., half:rot]
            out[..., :half] = x1 * cos - x2 * sin
            out[..., half:rot] = x2 * cos + x1 * sin
        out = out.astype(x.dtype)
        if x.ndim == 4:
            return (out.transpose(0, 2, 1, 3),)
        return (out.reshape(b, s, n * h),)
