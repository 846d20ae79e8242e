"""Attention (com.microsoft): multi-head self attention with a merged QKV
input projection, optional ``past`` key/value state, masks in every
``mask_index`` layout, ``attention_bias``, ``unidirectional`` (causal) and a
custom ``scale``."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy import parallel
from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._attention import attend, causal_mask, key_mask, merge_heads, read_head_attrs, split_heads
from ._util import MS


@register
class Attention(Kernel):
    op_type = "Attention"
    domain = MS
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        read_head_attrs(self, node)
        self.wants_present = node.num_outputs > 1
        sizes = node.attr("qkv_hidden_sizes")
        self.qkv_sizes = None if sizes is None else [int(v) for v in sizes]
        if self.qkv_sizes is not None and (len(self.qkv_sizes) != 3 or self.qkv_sizes[0] != self.qkv_sizes[1]):
            raise self.fail(f"qkv_hidden_sizes must be [H, H, Hv], got {self.qkv_sizes}")
        if int(node.attr("do_rotary", 0)):
            raise self.fail("do_rotary is not supported")
        if int(node.attr("past_present_share_buffer", 0)):
            raise self.fail("past_present_share_buffer is not supported")

    @classmethod
    def _check(cls, node: NodeInfo) -> str | None:
        if int(node.attr("do_rotary", 0) or 0):
            return "Attention with do_rotary=1 is not supported"
        if int(node.attr("past_present_share_buffer", 0) or 0):
            return "Attention with past_present_share_buffer=1 is not supported"
        return None

    def __call__(self, x, weights, bias=None, mask_index=None, past=None, attention_bias=None,
                 past_sequence_length=None) -> Sequence[Any]:
        x = np.asarray(x)
        w = np.asarray(weights)
        if x.ndim != 3 or w.ndim != 2 or w.shape[0] != x.shape[2]:
            raise self.fail(f"input (B,S,D) and weights (D, 3H) expected, got {x.shape}, {w.shape}")
        comp = np.float64 if x.dtype == np.float64 else np.float32
        hq, hk, hv = self.qkv_sizes or [w.shape[1] // 3] * 3
        if hq + hk + hv != w.shape[1]:
            raise self.fail(f"weights second dimension {w.shape[1]} != {hq}+{hk}+{hv}")
        n = self.num_heads
        if hq % n or hv % n:
            raise self.fail(f"hidden sizes {hq}, {hv} not divisible by num_heads {n}")
        proj = parallel.matmul(x.astype(comp, copy=False), w.astype(comp, copy=False))
        if bias is not None:
            bias = np.asarray(bias)
            if bias.shape != (w.shape[1],):
                raise self.fail(f"bias must have shape ({w.shape[1]},), got {bias.shape}")
            np.add(proj, bias.astype(comp, copy=False), out=proj)  # (a fresh product: in place)
        b, s = x.shape[:2]
        q = split_heads(proj[..., :hq], n)
        k = split_heads(proj[..., hq:hq + hk], n)
        v = split_heads(proj[..., hq + hk:], n)
        p = 0
        if past is not None:
            past = np.asarray(past, dtype=comp)
            if past.ndim != 5 or past.shape[0] != 2 or past.shape[1] != b or past.shape[2] != n:
                raise self.fail(f"past must have shape (2, {b}, {n}, P, head_size), got {past.shape}")
            p = past.shape[3]
            k = np.concatenate([past[0], k], axis=2)
            v = np.concatenate([past[1], v], axis=2)
        t = k.shape[2]
        scale = self.scale if self.scale is not None else 1.0 / np.sqrt(hq // n)
        masks = [key_mask(mask_index, b, s, t, p, self.filter_value, self.fail)]
        causal = causal_mask(s, t, p) if self.unidirectional else None
        if attention_bias is not None:
            masks.append(np.asarray(attention_bias, dtype=comp))
        out = merge_heads(attend(q, k, v, scale, masks, causal)).astype(x.dtype, copy=False)
        present = None
        if self.wants_present and k.shape == v.shape:  # (not built when the node has no present output)
            present = np.stack([k, v]).astype(x.dtype, copy=False)
        return [out, present]
