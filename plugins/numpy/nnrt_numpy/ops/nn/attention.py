"""Attention (opsets 23-25): scaled dot-product attention with MHA/GQA/MQA head
layouts, 3-D or 4-D inputs, an internal KV cache (past/present), an external
cache (``nonpad_kv_seqlen``), bool or additive masks, offset-aware causal
masking, sliding windows, softcap and the ``qk_matmul_output`` debug output.

Computation runs in the input type (like the op's function body; bfloat16-like
ml_dtypes matmuls accumulate in float32), the softmax in ``softmax_precision``
when given.  Fully masked query rows produce zeros.
"""
from __future__ import annotations

import numpy as np

from nnrt_core.ir.dtypes import DataType

from ...kernel import Kernel, NodeInfo, register


@register
class Attention(Kernel):
    op_type = "Attention"
    since_version = 23

    def _setup(self, node: NodeInfo) -> None:
        a = node.attr
        self.is_causal = bool(a("is_causal", 0))
        self.q_heads = a("q_num_heads")
        self.kv_heads = a("kv_num_heads")
        self.mode = int(a("qk_matmul_output_mode", 0))
        self.scale = a("scale")
        self.softcap = float(a("softcap", 0.0))
        self.left = int(a("left_window_size", -1))
        self.right = int(a("right_window_size", -1))
        self.softmax_precision = a("softmax_precision")
        self.num_outputs = node.num_outputs
        if self.softmax_precision is not None:
            try:
                prec = DataType(int(self.softmax_precision))
            except ValueError:
                prec = DataType.UNDEFINED
            if prec not in (DataType.FLOAT, DataType.FLOAT16, DataType.BFLOAT16, DataType.DOUBLE):
                raise self.fail(f"softmax_precision must be a floating element type (1, 10, 11 or 16), "
                                f"got {self.softmax_precision}")
        if self.mode not in (0, 1, 2, 3):
            raise self.fail(f"qk_matmul_output_mode must be 0..3, got {self.mode}")

    def _heads(self, x: np.ndarray, heads, name: str) -> np.ndarray:
        if x.ndim == 4:
            return x
        if x.ndim != 3 or not heads or x.shape[2] % int(heads):
            raise self.fail(f"{name} must be 4-D, or 3-D with its num_heads attribute dividing the hidden size")
        b, s, hid = x.shape
        return x.reshape(b, s, int(heads), hid // int(heads)).transpose(0, 2, 1, 3)

    def _allowed(self, attn_mask, nonpad_kv_seqlen, past_key, b: int, sq: int, total: int,
                 ct) -> tuple[np.ndarray, np.ndarray | None]:
        """Which (query, key) pairs may attend (mask, padding, causal and
        sliding windows) and the additive float mask, if any."""
        allowed = np.ones((1, 1, 1, 1), dtype=bool)
        bias = None
        if attn_mask is not None:
            m = attn_mask
            if m.shape[-1] < total:
                fill = False if m.dtype == np.bool_ else -np.inf
                pad = np.full(m.shape[:-1] + (total - m.shape[-1],), fill, dtype=m.dtype)
                m = np.concatenate([m, pad], axis=-1)
            if m.dtype == np.bool_:
                allowed = allowed & m
            else:
                bias = m.astype(ct)
        past_len = 0 if past_key is None else past_key.shape[2]
        j = np.arange(total)
        i = np.arange(sq)[:, None]
        if nonpad_kv_seqlen is not None and past_key is None:
            lens = nonpad_kv_seqlen.astype(np.int64).reshape(b, 1, 1, 1)
            offset = lens - sq
            allowed = allowed & (j < lens)
        else:
            offset = np.full((1, 1, 1, 1), past_len, dtype=np.int64)
        pos = i + offset  # absolute query positions
        if self.is_causal:
            allowed = allowed & (j <= pos)
        if self.left >= 0:
            allowed = allowed & (j >= pos - self.left)
        if self.right >= 0:
            allowed = allowed & (j <= pos + self.right)
        return allowed, bias

    def __call__(self, q, k, v, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None):
        out_dtype = q.dtype
        q4 = self._heads(q, self.q_heads, "Q")
        k4 = self._heads(k, self.kv_heads, "K")
        v4 = self._heads(v, self.kv_heads, "V")
        if (past_key is None) != (past_value is None):
            raise self.fail("past_key and past_value must be given together")
        if past_key is not None:
            k4 = np.concatenate([past_key, k4.astype(past_key.dtype, copy=False)], axis=2)
            v4 = np.concatenate([past_value, v4.astype(past_value.dtype, copy=False)], axis=2)
        present = (k4, v4)
        b, hq, sq, d = q4.shape
        hkv, total = k4.shape[1], k4.shape[2]
        if hq % hkv:
            raise self.fail(f"q_num_heads {hq} must be a multiple of kv_num_heads {hkv}")
        ct = out_dtype.type
        sm_type = ct if self.softmax_precision is None else DataType(self.softmax_precision).numpy.type

        def mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            if a.dtype.kind == "V":  # ml_dtypes: multiply in float32, round to the type
                return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
            return np.matmul(a, b)
        qf, kf, vf = (t.astype(ct, copy=False) for t in (q4, k4, v4))
        if hq != hkv:
            kf = np.repeat(kf, hq // hkv, axis=1)
            vf = np.repeat(vf, hq // hkv, axis=1)
        scale = float(self.scale) if self.scale is not None else 1.0 / np.sqrt(d)
        s = ct(np.sqrt(scale))
        scores = mm(qf * s, np.swapaxes(kf * s, -1, -2))  # (b, hq, sq, total)
        qk_raw = scores
        if self.softcap > 0:
            scores = np.tanh(scores / ct(self.softcap)) * ct(self.softcap)
        qk_capped = scores

        allowed, bias = self._allowed(attn_mask, nonpad_kv_seqlen, past_key, b, sq, total, ct)
        allowed = np.broadcast_to(allowed, np.broadcast_shapes(allowed.shape, scores.shape))
        with np.errstate(invalid="ignore", over="ignore"):
            biased = scores if bias is None else scores + bias
            logits = np.where(allowed, biased, ct(-np.inf)).astype(sm_type, copy=False)
            mx = logits.max(axis=-1, keepdims=True)
            dead = np.isneginf(mx)
            e = np.exp(logits - np.where(dead, sm_type(0), mx))
            e = np.where(allowed, e, sm_type(0))
            den = e.sum(axis=-1, keepdims=True)
            probs = np.where(dead | (den == 0), sm_type(0), e / np.where(den == 0, sm_type(1), den))
            probs = probs.astype(ct, copy=False)
        y = mm(probs, vf)  # (b, hq, sq, dv)
        if q.ndim == 3:
            y = y.transpose(0, 2, 1, 3).reshape(b, sq, -1)
        outs = [y.astype(out_dtype), present[0], present[1]]
        if self.num_outputs > 3:
            qk = (qk_raw, qk_capped, np.where(allowed, biased, -np.inf), probs)[self.mode]
            outs.append(np.asarray(qk).astype(out_dtype))
        return tuple(outs[: self.num_outputs])
