"""LSTM (opsets 1/7, 14, 22), gates ordered i, o, f, c in W/R/B and i, o, f
in the peephole weights P.  Supports ``input_forget`` (coupled input and
forget gates), ``clip``, custom activations, bidirectional runs,
``sequence_lens`` and (14+) ``layout``."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import NodeInfo, register

from ._common import RecurrentBase


class _LSTMBase(RecurrentBase):
    op_type = "LSTM"
    _gates = 4
    _default_acts = ("Sigmoid", "Tanh", "Tanh")

    def _setup(self, node: NodeInfo) -> None:
        super()._setup(node)
        self.input_forget = bool(node.attr("input_forget", 0))

    def __call__(self, X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None) -> Sequence[Any]:
        x, w, r, b, lens, (h0, c0), out_dt = self.prepare(X, W, R, B, sequence_lens, [initial_h, initial_c])
        hs = r.shape[-1]
        nd = self.num_dirs
        if P is None:
            p = np.zeros((nd, 3 * hs), dtype=x.dtype)
        else:
            p = np.asarray(P, dtype=x.dtype)
            if p.shape != (nd, 3 * hs):
                raise self.fail(f"P must have shape {(nd, 3 * hs)}, got {p.shape}")
        ys, finals = [], []
        for d, reverse in self.directions():
            f, g, h = self.acts[d]
            xw = x @ w[d].T + (b[d, :4 * hs] + b[d, 4 * hs:])
            rt = r[d].T
            pi, po, pf = p[d, :hs], p[d, hs:2 * hs], p[d, 2 * hs:]
            input_forget = self.input_forget

            def step(xw_t: np.ndarray, st: list[np.ndarray]) -> list[np.ndarray]:
                h_prev, c_prev = st
                gates = xw_t + h_prev @ rt
                ig = f(self.clipped(gates[:, :hs] + pi * c_prev))
                if input_forget:  # coupled gates: f = 1 - i (as ONNX Runtime does)
                    fg = 1 - ig
                else:
                    fg = f(self.clipped(gates[:, 2 * hs:3 * hs] + pf * c_prev))
                cc = g(self.clipped(gates[:, 3 * hs:]))
                c = fg * c_prev + ig * cc
                og = f(self.clipped(gates[:, hs:2 * hs] + po * c))
                return [og * h(c), c]

            y, st = self.scan(xw, [h0[d], c0[d]], lens, reverse, step)
            ys.append(y)
            finals.append(st)
        return self.finish(ys, finals, out_dt)


@register
class LSTM1(_LSTMBase):
    since_version = 1


@register
class LSTM14(_LSTMBase):
    since_version = 14
    _has_layout = True
