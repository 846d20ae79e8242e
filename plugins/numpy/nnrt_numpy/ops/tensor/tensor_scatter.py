"""TensorScatter (opset 24): functional KV-cache update, writing ``update`` into
``past_cache`` along ``axis`` at a per-batch ``write_indices`` offset (linear
or circular)."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


@register
class TensorScatter(Kernel):
    op_type = "TensorScatter"
    since_version = 24

    def _setup(self, node: NodeInfo) -> None:
        self.axis = int(node.attr("axis", -2))
        self.mode = node.attr("mode", "linear")
        if self.mode not in ("linear", "circular"):
            raise self.fail(f"unknown mode {self.mode!r}")

    def __call__(self, past: np.ndarray, update: np.ndarray, write_indices: np.ndarray | None = None):
        r = past.ndim
        if not -r <= self.axis < r or self.axis % r == 0:
            raise self.fail(f"axis {self.axis} out of range (and must not be the batch axis)")
        axis = self.axis % r
        if update.ndim != r or any(update.shape[i] != past.shape[i] for i in range(r) if i != axis):
            raise self.fail(f"update shape {update.shape} incompatible with cache {past.shape}")
        b, seq, max_seq = past.shape[0], update.shape[axis], past.shape[axis]
        starts = np.zeros(b, dtype=np.int64) if write_indices is None else write_indices.astype(np.int64).reshape(b)
        pos = starts[:, None] + np.arange(seq)  # (b, seq)
        if self.mode == "circular":
            pos %= max_seq
        elif pos.size and (pos.min() < 0 or pos.max() >= max_seq):
            raise self.fail("write_indices + sequence_length exceeds max_sequence_length")
        out = past.copy()
        moved = np.moveaxis(out, axis, 1)  # view: (b, max_seq, ...) with the other axes after
        upd = np.moveaxis(update, axis, 1)
        moved[np.arange(b)[:, None], pos] = upd
        return (out,)
