"""MultiHeadAttention (com.microsoft): self / cross attention on already
projected Q, K, V (3-D ``(B, S, H)``, packed QKV ``(B, S, N, 3, h)``, packed
KV ``(B, L, N, 2, h)`` or key/value already split in heads
``(B, N, L, h)``), with optional projection ``bias``, ``key_padding_mask``,
``attention_bias``, ``past_key``/``past_value`` and causal masking."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._attention import attend, causal_mask, key_mask, merge_heads, read_head_attrs, split_heads
from ._util import MS


@register
class MultiHeadAttention(Kernel):
    op_type = "MultiHeadAttention"
    domain = MS
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        read_head_attrs(self, node)
        if node.present(8) or node.present(9):
            raise self.fail("past_sequence_length / cache_indirection (buffer sharing, beam search) are not supported")
        if node.present(6) != node.present(7):
            raise self.fail("past_key and past_value must be given together")

    @classmethod
    def _check(cls, node: NodeInfo) -> str | None:
        if node.present(8) or node.present(9):
            return "MultiHeadAttention buffer sharing / cache_indirection inputs are not supported"
        return None

    def __call__(self, query, key=None, value=None, bias=None, key_padding_mask=None, attention_bias=None,
                 past_key=None, past_value=None, past_sequence_length=None, cache_indirection=None) -> Sequence[Any]:
        n = self.num_heads
        q_in = np.asarray(query)
        dt = q_in.dtype
        comp = np.float64 if dt == np.float64 else np.float32
        q_in = q_in.astype(comp)
        b, s = q_in.shape[:2]
        bias = None if bias is None else np.asarray(bias, dtype=comp)
        kv_in_heads = False
        if q_in.ndim == 5:  # packed QKV (B, S, N, 3, h)
            if key is not None or value is not None or q_in.shape[3] != 3 or q_in.shape[2] != n:
                raise self.fail(f"packed QKV must be (B, S, {n}, 3, h) with no key/value, got {q_in.shape}")
            h = q_in.shape[4]
            q, k, v = (q_in[:, :, :, i, :].reshape(b, s, n * h) for i in range(3))
        elif q_in.ndim == 3:
            q = q_in
            if key is None:
                raise self.fail("key is required unless query is packed QKV")
            key = np.asarray(key, dtype=comp)
            if key.ndim == 5:  # packed KV (B, L, N, 2, h)
                if value is not None or key.shape[3] != 2 or key.shape[2] != n:
                    raise self.fail(f"packed KV must be (B, L, {n}, 2, h) with no value, got {key.shape}")
                lk = key.shape[1]
                k = key[:, :, :, 0, :].reshape(b, lk, -1)
                v = key[:, :, :, 1, :].reshape(b, lk, -1)
            elif key.ndim == 4:  # already (B, N, L, h)
                if value is None or np.asarray(value).ndim != 4:
                    raise self.fail("4-D key needs a 4-D value")
                k, v = key, np.asarray(value, dtype=comp)
                kv_in_heads = True
            elif key.ndim == 3:
                if value is None:
                    raise self.fail("value is required with a 3-D key")
                k, v = key, np.asarray(value, dtype=comp)
            else:
                raise self.fail(f"unsupported key shape {key.shape}")
        else:
            raise self.fail(f"query must be 3-D or packed 5-D, got {q_in.shape}")
        hq = q.shape[-1]
        if hq % n:
            raise self.fail(f"hidden size {hq} not divisible by num_heads {n}")
        if bias is not None:
            hv = bias.shape[0] - 2 * hq
            q = q + bias[:hq]
            if not kv_in_heads:
                k = k + bias[hq:2 * hq]
                v = v + bias[2 * hq:]
        qh = split_heads(q, n)
        kh = k if kv_in_heads else split_heads(k, n)
        vh = v if kv_in_heads else split_heads(v, n)
        p = 0
        if past_key is not None and past_value is not None and not kv_in_heads:
            pk = np.asarray(past_key, dtype=comp)
            pv = np.asarray(past_value, dtype=comp)
            p = pk.shape[2]
            kh = np.concatenate([pk, kh], axis=2)
            vh = np.concatenate([pv, vh], axis=2)
        t = kh.shape[2]
        scale = self.scale if self.scale is not None else 1.0 / np.sqrt(hq // n)
        masks = [key_mask(key_padding_mask, b, s, t, p, self.filter_value, self.fail, allow_4d=False)]
        causal = causal_mask(s, t, p) if self.unidirectional else None
        if attention_bias is not None:
            masks.append(np.asarray(attention_bias, dtype=comp))
        out = merge_heads(attend(qh, kh, vh, scale, masks, causal)).astype(dt)
        return [out, kh.astype(dt), vh.astype(dt), None]
