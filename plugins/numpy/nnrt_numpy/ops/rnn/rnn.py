"""RNN (opsets 1/7, 14, 22): ``H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb)``.

Version 14 adds the ``layout`` attribute (batch-major tensors)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import register

from ._common import RecurrentBase


class _RNNBase(RecurrentBase):
    op_type = "RNN"
    _gates = 1
    _default_acts = ("Tanh",)

    def __call__(self, X, W, R, B=None, sequence_lens=None, initial_h=None) -> Sequence[Any]:
        x, w, r, b, lens, (h0,), out_dt = self.prepare(X, W, R, B, sequence_lens, [initial_h])
        hs = w.shape[1]
        ys, finals = [], []
        for d, reverse in self.directions():
            f = self.acts[d][0]
            xw = x @ w[d].T + (b[d, :hs] + b[d, hs:])
            rt = r[d].T

            def step(xw_t: np.ndarray, st: list[np.ndarray]) -> list[np.ndarray]:
                return [f(self.clipped(xw_t + st[0] @ rt))]

            y, st = self.scan(xw, [h0[d]], lens, reverse, step)
            ys.append(y)
            finals.append(st)
        return self.finish(ys, finals, out_dt)


@register
class RNN1(_RNNBase):
    since_version = 1


@register
class RNN14(_RNNBase):
    since_version = 14
    _has_layout = True
