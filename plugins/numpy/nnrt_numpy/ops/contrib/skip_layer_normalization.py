"""SkipLayerNormalization and SkipSimplifiedLayerNormalization (com.microsoft):
layer norm (or RMS norm) of ``input + skip (+ bias)`` over the last axis.

Outputs: normalized result, mean, inverse std-dev, and the pre-norm sum."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._norm import comp_dtype, layer_norm
from ..nn._norm import normalize_rows
from ._util import MS


class _SkipNormBase(Kernel):
    domain = MS
    since_version = 1
    _simplified = False

    def _setup(self, node: NodeInfo) -> None:
        self.eps = float(node.attr("epsilon", 1e-12))

    def _run(self, x, skip, gamma, beta, bias) -> list[Any]:
        x = np.asarray(x)
        skip = np.asarray(skip)
        if x.ndim not in (2, 3):
            raise self.fail(f"input must be 2-D or 3-D, got shape {x.shape}")
        h = x.shape[-1]
        try:
            np.broadcast_shapes(skip.shape, x.shape)
        except ValueError:
            raise self.fail(f"skip shape {skip.shape} does not broadcast to input shape {x.shape}") from None
        if skip.shape[-1] != h:
            raise self.fail(f"skip hidden size {skip.shape[-1]} != {h}")
        comp = comp_dtype(x.dtype)
        s = x.astype(comp) + skip.astype(comp)
        for name, v in (("gamma", gamma), ("beta", beta), ("bias", bias)):
            if v is not None and np.asarray(v).shape != (h,):
                raise self.fail(f"{name} must have shape ({h},), got {np.asarray(v).shape}")
        if bias is not None:
            s = s + np.asarray(bias, dtype=comp)
        if not self._simplified and s.dtype == x.dtype:
            fast = normalize_rows(s, s.ndim - 1, self.eps, np.asarray(gamma, dtype=comp),
                                  None if beta is None else np.asarray(beta, dtype=comp))
            if fast is not None:
                y, mean, inv = fast
                return [y, mean.astype(np.float32), inv.astype(np.float32), s]
        y, mean, inv = layer_norm(s, s.ndim - 1, self.eps, self._simplified)
        y = y * np.asarray(gamma, dtype=comp)
        if beta is not None:
            y = y + np.asarray(beta, dtype=comp)
        return [y.astype(x.dtype), mean.astype(np.float32), inv.astype(np.float32), s.astype(x.dtype)]


@register
class SkipLayerNormalization(_SkipNormBase):
    op_type = "SkipLayerNormalization"

    def __call__(self, x, skip, gamma, beta=None, bias=None) -> Sequence[Any]:
        return self._run(x, skip, gamma, beta, bias)


@register
class SkipSimplifiedLayerNormalization(_SkipNormBase):
    op_type = "SkipSimplifiedLayerNormalization"
    _simplified = True

    def __call__(self, x, skip, gamma, bias=None) -> Sequence[Any]:
        return self._run(x, skip, gamma, None, bias)
