"""EmbedLayerNormalization (com.microsoft): BERT's embedding block in one op.

``sum = word[input_ids] + position[position_ids] (+ segment[segment_ids])``
is layer-normalized over the hidden axis (``gamma``, ``beta``, ``epsilon``).
Without ``position_ids`` token ``s`` takes position ``s``; ``position_ids``
may be (B, S) or (1, S). Outputs: the normalized sum, ``mask_index`` (the
number of ones per row of ``mask``, zeros without a mask) and the raw
``embedding_sum``."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._norm import layer_norm
from ._util import MS


@register
class EmbedLayerNormalization(Kernel):
    op_type = "EmbedLayerNormalization"
    domain = MS
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.eps = float(node.attr("epsilon", 1e-12))
        if self.eps < 0:
            raise self.fail(f"epsilon must be >= 0, got {self.eps}")
        if node.present(1) != node.present(4):
            raise self.fail("segment_ids and segment_embedding must be given together")

    def _lookup(self, table: np.ndarray, ids: np.ndarray, name: str) -> np.ndarray:
        if table.ndim != 2:
            raise self.fail(f"{name} must be 2-D (rows, hidden), got shape {table.shape}")
        if ids.size and (ids.min() < 0 or ids.max() >= table.shape[0]):
            raise self.fail(f"{name} indices must lie in [0, {table.shape[0]}), got [{ids.min()}, {ids.max()}]")
        return table[ids]

    def __call__(self, input_ids, segment_ids, word_embedding, position_embedding, segment_embedding=None,
                 gamma=None, beta=None, mask=None, position_ids=None) -> Sequence[Any]:
        ids = np.asarray(input_ids).astype(np.int64)
        if ids.ndim != 2:
            raise self.fail(f"input_ids must be 2-D (batch, sequence), got shape {ids.shape}")
        b, s = ids.shape
        word = np.asarray(word_embedding)
        dt = word.dtype
        comp = np.float64 if dt == np.float64 else np.float32
        hidden = word.shape[-1]
        if position_ids is None:
            pos = np.broadcast_to(np.arange(s), (b, s))
        else:
            pos = np.asarray(position_ids).astype(np.int64)
            if pos.shape not in ((b, s), (1, s)):
                raise self.fail(f"position_ids must have shape ({b}, {s}) or (1, {s}), got {pos.shape}")
            pos = np.broadcast_to(pos, (b, s))
        total = self._lookup(word, ids, "word_embedding").astype(comp)
        total = total + self._lookup(np.asarray(position_embedding), pos, "position_embedding").astype(comp)
        if segment_ids is not None:
            seg = np.asarray(segment_ids).astype(np.int64)
            if seg.shape != (b, s):
                raise self.fail(f"segment_ids must have shape ({b}, {s}), got {seg.shape}")
            total = total + self._lookup(np.asarray(segment_embedding), seg, "segment_embedding").astype(comp)
        for name, v in (("gamma", gamma), ("beta", beta)):
            if v is None or np.asarray(v).shape != (hidden,):
                raise self.fail(f"{name} must have shape ({hidden},), got {None if v is None else np.asarray(v).shape}")
        y, _, _ = layer_norm(total, 2, self.eps, False)
        y = y * np.asarray(gamma, dtype=comp) + np.asarray(beta, dtype=comp)
        if mask is None:
            mask_index = np.zeros(b, dtype=np.int32)
        else:
            m = np.asarray(mask)
            if m.shape != (b, s):
                raise self.fail(f"mask must have shape ({b}, {s}), got {m.shape}")
            mask_index = np.count_nonzero(m == 1, axis=1).astype(np.int32)
        return [y.astype(dt), mask_index, total.astype(dt)]
