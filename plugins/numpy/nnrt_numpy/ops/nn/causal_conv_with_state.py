"""CausalConvWithState (opset 27): stateful causal depthwise 1-D convolution with
an optional fused SiLU; the carry state holds the last ``k - 1`` positions."""
from __future__ import annotations

import numpy as np
from nnrt_numpy import special

from ...kernel import Kernel, NodeInfo, register


@register
class CausalConvWithState(Kernel):
    op_type = "CausalConvWithState"
    since_version = 27
    uses_scipy = True

    def _setup(self, node: NodeInfo) -> None:
        self.activation = node.attr("activation", "none")
        if self.activation not in ("none", "silu", "swish"):
            raise self.fail(f"unknown activation {self.activation!r}")

    def __call__(self, x, w, bias=None, past_state=None) -> tuple[np.ndarray, np.ndarray]:
        if x.ndim != 3 or w.ndim != 3 or w.shape[0] != x.shape[1] or w.shape[1] != 1:
            raise self.fail(f"expects input (B, C, L) and weight (C, 1, k), got {x.shape} and {w.shape}")
        b, c, length = x.shape
        k = w.shape[2]
        ct = np.float32 if x.dtype == np.float16 or x.dtype.kind == "V" else x.dtype
        if past_state is None:
            past = np.zeros((b, c, k - 1), dtype=x.dtype)
        elif past_state.shape != (b, c, k - 1):
            raise self.fail(f"past_state must have shape {(b, c, k - 1)}")
        else:
            past = past_state.astype(x.dtype, copy=False)
        padded = np.concatenate([past, x], axis=2)
        pf = padded.astype(ct, copy=False)
        wf = w[:, 0].astype(ct, copy=False)
        y = np.zeros((b, c, length), dtype=ct)
        for j in range(k):
            y += pf[:, :, j:j + length] * wf[:, j:j + 1]
        if bias is not None:
            y += bias.astype(ct).reshape(1, c, 1)
        if self.activation != "none":
            y = y * special.expit(y).astype(ct, copy=False)
        present = np.ascontiguousarray(padded[:, :, padded.shape[2] - (k - 1):])
        return y.astype(x.dtype, copy=False), present
