"""LinearAttention (opset 27): recurrent linear attention with the linear, gated,
delta and gated-delta update rules and GQA head sharing.

The recurrence runs token by token (it is inherently sequential) and is
vectorized over batch and heads; computation is in float32 for narrower types.
"""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register

_RULES = ("linear", "gated", "delta", "gated_delta")


@register
class LinearAttention(Kernel):
    op_type = "LinearAttention"
    since_version = 27

    def _setup(self, node: NodeInfo) -> None:
        self.rule = node.attr("update_rule", "gated_delta")
        if self.rule not in _RULES:
            raise self.fail(f"unknown update_rule {self.rule!r}")
        hq, hkv = node.attr("q_num_heads"), node.attr("kv_num_heads")
        if not hq or not hkv or int(hq) % int(hkv):
            raise self.fail("q_num_heads and kv_num_heads are required; q_num_heads must be a multiple")
        self.hq, self.hkv = int(hq), int(hkv)
        self.scale = float(node.attr("scale", 0.0))

    def __call__(self, q, k, v, past_state=None, decay=None, beta=None):
        bsz, t, _ = q.shape
        hq, hkv = self.hq, self.hkv
        dk = q.shape[2] // hq
        dv = v.shape[2] // hkv
        ct = np.float64 if q.dtype == np.float64 else np.float32
        qh = q.astype(ct).reshape(bsz, t, hkv, hq // hkv, dk)
        kh = k.astype(ct).reshape(bsz, t, hkv, dk)
        vh = v.astype(ct).reshape(bsz, t, hkv, dv)
        gated = self.rule in ("gated", "gated_delta")
        delta = self.rule in ("delta", "gated_delta")
        if gated and decay is None:
            raise self.fail(f"update_rule {self.rule!r} needs the decay input")
        if delta and beta is None:
            raise self.fail(f"update_rule {self.rule!r} needs the beta input")
        if gated:
            g = np.exp(decay.astype(ct))
            g = g.reshape(bsz, t, hkv, dk, 1) if decay.shape[2] == hkv * dk else g.reshape(bsz, t, hkv, 1, 1)
        if delta:
            bt = beta.astype(ct).reshape(bsz, t, -1, 1)  # (B, T, Hkv or 1, 1)
        scale = self.scale or 1.0 / np.sqrt(dk)
        s = np.zeros((bsz, hkv, dk, dv), dtype=ct) if past_state is None else past_state.astype(ct).copy()
        out = np.empty((bsz, t, hkv, hq // hkv, dv), dtype=ct)
        for i in range(t):
            kt, vt = kh[:, i], vh[:, i]
            if gated:
                s = s * g[:, i]
            if delta:
                pred = np.einsum("bhkv,bhk->bhv", s, kt)
                s = s + np.einsum("bhk,bhv->bhkv", kt, bt[:, i] * (vt - pred))
            else:
                s = s + np.einsum("bhk,bhv->bhkv", kt, vt)
            out[:, i] = np.einsum("bhgk,bhkv->bhgv", qh[:, i], s) * ct(scale)
        return out.reshape(bsz, t, hq * dv).astype(q.dtype), s.astype(q.dtype if past_state is None else past_state.dtype)
