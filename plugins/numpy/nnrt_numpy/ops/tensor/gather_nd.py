"""GatherND with ``batch_dims``."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


@register
class GatherND(Kernel):
    op_type = "GatherND"
    since_version = 11

    def _setup(self, node: NodeInfo) -> None:
        self.b = int(node.attr("batch_dims", 0))

    def __call__(self, data: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray]:
        b = self.b
        k = indices.shape[-1]
        if b >= min(data.ndim, indices.ndim) or k > data.ndim - b:
            raise self.fail(f"invalid batch_dims={b} / index depth {k} for data rank {data.ndim}")
        if data.shape[:b] != indices.shape[:b]:
            raise self.fail("batch dimensions of data and indices differ")
        batch = int(np.prod(data.shape[:b]))
        dims = data.shape[b:b + k]
        idx = indices.reshape(batch, -1, k).astype(np.int64)
        lim = np.array(dims, dtype=np.int64)
        if idx.size and ((idx < -lim).any() or (idx >= lim).any()):
            raise self.fail("indices out of range")
        idx = np.where(idx < 0, idx + lim, idx)
        flat = data.reshape((batch,) + dims + data.shape[b + k:])
        bidx = np.arange(batch).reshape(batch, 1)
        out = flat[(bidx,) + tuple(idx[..., i] for i in range(k))]
        return (out.reshape(indices.shape[:-1] + data.shape[b + k:]),)
