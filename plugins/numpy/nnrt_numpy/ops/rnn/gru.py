"""GRU (opsets 1/7, 14, 22), gates ordered z, r, h in W/R/B.

``linear_before_reset`` applies the reset gate after the recurrent
projection of the candidate (cuDNN style).  Version 14 adds ``layout``."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import NodeInfo, register

from ._common import RecurrentBase


class _GRUBase(RecurrentBase):
    op_type = "GRU"
    _gates = 3
    _default_acts = ("Sigmoid", "Tanh")

    def _setup(self, node: NodeInfo) -> None:
        super()._setup(node)
        self.linear_before_reset = bool(node.attr("linear_before_reset", 0))

    def __call__(self, X, W, R, B=None, sequence_lens=None, initial_h=None) -> Sequence[Any]:
        x, w, r, b, lens, (h0,), out_dt = self.prepare(X, W, R, B, sequence_lens, [initial_h])
        hs = r.shape[-1]
        ys, finals = [], []
        for d, reverse in self.directions():
            f, g = self.acts[d]
            wb, rb = b[d, :3 * hs], b[d, 3 * hs:]
            # z and r use Wb + Rb; the candidate keeps Rbh apart (it sits inside the reset product).
            xw = x @ w[d].T + wb + np.concatenate([rb[:2 * hs], np.zeros(hs, dtype=rb.dtype)])
            r_zr = r[d, :2 * hs].T
            r_h = r[d, 2 * hs:].T
            rbh = rb[2 * hs:]
            lbr = self.linear_before_reset

            def step(xw_t: np.ndarray, st: list[np.ndarray]) -> list[np.ndarray]:
                h_prev = st[0]
                zr = f(self.clipped(xw_t[:, :2 * hs] + h_prev @ r_zr))
                z, rg = zr[:, :hs], zr[:, hs:]
                if lbr:
                    cand = xw_t[:, 2 * hs:] + rg * (h_prev @ r_h + rbh)
                else:
                    cand = xw_t[:, 2 * hs:] + (rg * h_prev) @ r_h + rbh
                hh = g(self.clipped(cand))
                return [(1 - z) * hh + z * h_prev]

            y, st = self.scan(xw, [h0[d]], lens, reverse, step)
            ys.append(y)
            finals.append(st)
        return self.finish(ys, finals, out_dt)


@register
class GRU1(_GRUBase):
    since_version = 1


@register
class GRU14(_GRUBase):
    since_version = 14
    _has_layout = True
