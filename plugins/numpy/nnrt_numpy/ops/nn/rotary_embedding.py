"""RotaryEmbedding (opset 23): rotate (all or the first ``rotary_embedding_dim``
features of) each head by position-dependent angles, in halves or interleaved."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


@register
class RotaryEmbedding(Kernel):
    op_type = "RotaryEmbedding"
    since_version = 23

    def _setup(self, node: NodeInfo) -> None:
        self.interleaved = bool(node.attr("interleaved", 0))
        self.num_heads = int(node.attr("num_heads", 0))
        self.rot_dim = int(node.attr("rotary_embedding_dim", 0))

    def __call__(self, x, cos_cache, sin_cache, position_ids=None) -> tuple[np.ndarray]:
        if x.ndim == 4:
            xs = x.transpose(0, 2, 1, 3)  # (B, S, H, D)
        elif x.ndim == 3:
            if self.num_heads <= 0 or x.shape[2] % self.num_heads:
                raise self.fail("num_heads must be set and divide hidden_size for 3-D input")
            xs = x.reshape(x.shape[0], x.shape[1], self.num_heads, -1)
        else:
            raise self.fail("input must be 3-D or 4-D")
        d = xs.shape[3]
        rd = self.rot_dim or d
        if rd > d or rd % 2:
            raise self.fail(f"rotary_embedding_dim {rd} must be even and <= head size {d}")
        want = 2 if position_ids is not None else 3
        if cos_cache.ndim != want or sin_cache.ndim != want:
            raise self.fail(f"cos_cache and sin_cache have ranks {cos_cache.ndim} and {sin_cache.ndim}; expected "
                            f"{want} ({'with' if want == 2 else 'without'} position_ids)")
        if position_ids is not None:
            if position_ids.size and (position_ids.min() < 0 or position_ids.max() >= cos_cache.shape[0]):
                raise self.fail("position_ids out of range of the caches")
            cos_cache, sin_cache = cos_cache[position_ids], sin_cache[position_ids]
        half = rd // 2
        if cos_cache.shape[-1] != half or sin_cache.shape[-1] != half:
            raise self.fail(f"cache last dimension must be rotary_embedding_dim/2 = {half}")
        cos = cos_cache[:, :, None, :]
        sin = sin_cache[:, :, None, :]
        rot = xs[..., :rd]
        if self.interleaved:
            x1, x2 = rot[..., 0::2], rot[..., 1::2]
        else:
            x1, x2 = rot[..., :half], rot[..., half:]
        real = cos * x1 - sin * x2
        imag = sin * x1 + cos * x2
        out = np.array(xs, dtype=x.dtype)
        if self.interleaved:
            out[..., 0:rd:2] = real
            out[..., 1:rd:2] = imag
        else:
            out[..., :half] = real
            out[..., half:rd] = imag
        if x.ndim == 4:
            return (np.ascontiguousarray(out.transpose(0, 2, 1, 3)),)
        return (out.reshape(x.shape),)
