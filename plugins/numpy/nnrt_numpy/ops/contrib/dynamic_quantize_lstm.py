"""DynamicQuantizeLSTM (com.microsoft): an LSTM whose ``W`` (D, I, 4H) and
``R`` (D, H, 4H) are int8/uint8 with per-direction or per-gate-column scales
and zero points, as ``onnxruntime.quantization.quantize_dynamic`` writes it.

Arithmetic follows ONNX Runtime's CPU kernel: the input rows of the first
``max(sequence_lens)`` steps are quantized to uint8 once (range including 0,
``scale = (max - min) / 255``), the hidden state of all batch rows is
quantized again at every step (rows whose sequence ended count as zeros),
integer products are exact and rescaled in float32 by ``a_scale * w_scale``.
Reverse directions run on each sequence reversed within its own length.
Gates are ordered i, o, f, c; peepholes i, o, f; ``input_forget`` couples
f = 1 - i. Sigmoid and Tanh are ORT's MLAS approximations to the bit
(``nnrt_numpy.mlas_act``): every step re-quantizes the hidden state, so a
last-bit difference in a gate flips a uint8 code and grows over the sequence. ORT's kernel splits the batch over its threads when quantizing the
hidden state (batch > 4, or batch >= 2 with hidden <= 256); this kernel
quantizes the whole batch at once, ORT's result with one thread.

Constant weights (the usual case) are converted once, at compile time, to
exact float32 (:class:`..quant._imatmul.IntWeights`); every product (the input
rows once, the hidden state at each step) is then one float32 BLAS call,
exact while no partial sum can reach 2**24 and cut along K (float64 total)
where it could (:func:`..quant._imatmul.exact_product`), converted to float32
as ORT converts its int32 accumulator."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_core.errors import OpError
from nnrt_numpy.kernel import NodeInfo, register

from ..quant._imatmul import IntWeights, exact_product
from ..rnn._common import RecurrentBase
from ._util import MS

#: per direction: the integer weights minus zero points (exact float32) and the float32 scales
_Weights = tuple[list[IntWeights], np.ndarray]


def quantize_rows(a: np.ndarray) -> tuple[np.ndarray, np.float32, float]:
    """``a`` as exact float32 integers ``q - zero_point``, its scale (uint8 range
    incl. 0) and the bound ``max |q - zero_point|`` (for :func:`exact_product`)."""
    lo = np.float32(min(0.0, float(a.min()))) if a.size else np.float32(0)
    hi = np.float32(max(0.0, float(a.max()))) if a.size else np.float32(0)
    scale = np.float32(1) if hi == lo else np.float32((hi - lo) / np.float32(255))
    zp = float(np.rint(np.clip(np.float32(0) - lo / scale, 0, 255)))
    q = np.divide(a, scale, dtype=np.float32)
    np.rint(q, out=q)
    # clip(q + zp, 0, 255) - zp in one clip: the same integers, exact in float32
    np.clip(q, np.float32(-zp), np.float32(255.0 - zp), out=q)
    return q, scale, max(zp, 255.0 - zp)


@register
class DynamicQuantizeLSTM(RecurrentBase):
    op_type = "DynamicQuantizeLSTM"
    domain = MS
    since_version = 1
    _gates = 4
    _default_acts = ("Sigmoid", "Tanh", "Tanh")
    _mlas_acts = True  # ORT's own logistic/tanh: the re-quantized state amplifies any last-bit difference

    def _setup(self, node: NodeInfo) -> None:
        super()._setup(node)
        self.input_forget = bool(node.attr("input_forget", 0))
        for k, name in ((8, "W_scale"), (9, "W_zero_point"), (10, "R_scale"), (11, "R_zero_point")):
            if not node.present(k):
                raise self.fail(f"input {name} is required")
        self._const: dict[str, _Weights] = {}  # constant W / R, converted once, here
        r = node.const(2)
        self.hidden = self.hidden_size if self.hidden_size is not None else (
            r.shape[1] if r is not None and r.ndim == 3 else 0)
        for name, at in (("W", (1, 8, 9)), ("R", (2, 10, 11))):
            arrays = [node.const(j) for j in at]
            if all(a is not None for a in arrays) and self.hidden and arrays[0].ndim == 3:
                try:
                    self._const[name] = self._weights(*arrays, arrays[0].shape[1], name)
                except OpError:
                    pass  # malformed: the run raises the same error, naming the input

    def _weights_of(self, w: Any, scale: Any, zp: Any, rows: int, name: str) -> _Weights:
        """The compile-time weights when they fit this call's sizes, else :meth:`_weights` now."""
        got = self._const.get(name)
        if got is not None and len(got[0]) == self.num_dirs and got[0][0].f32.shape == (rows, 4 * self.hidden):
            return got
        return self._weights(w, scale, zp, rows, name)

    def _weights(self, w: Any, scale: Any, zp: Any, rows: int, name: str) -> _Weights:
        """Integer weights minus their zero points per direction (rows, 4H) and float32 scales (D, 1 or 4H)."""
        w = np.asarray(w)
        d, h4 = self.num_dirs, 4 * self.hidden
        if w.dtype not in (np.int8, np.uint8) or w.shape != (d, rows, h4):
            raise self.fail(f"{name} must be int8/uint8 of shape {(d, rows, h4)}, got {w.dtype} {w.shape}")
        params = []
        for what, p in (("scale", scale), ("zero_point", zp)):
            p = np.asarray(p)
            if p.shape not in ((d,), (d, h4)):
                raise self.fail(f"{name}_{what} must have shape ({d},) or ({d}, {h4}), got {p.shape}")
            params.append(p.reshape(d, 1, -1))
        s, z = params
        wz = w.astype(np.int64) - z.astype(np.int64)
        return [IntWeights(wz[k]) for k in range(d)], s.astype(np.float32).reshape(d, -1)

    def __call__(self, X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None,
                 W_scale=None, W_zero_point=None, R_scale=None, R_zero_point=None) -> Sequence[Any]:
        x = np.asarray(X)
        if x.dtype != np.float32 or x.ndim != 3:
            raise self.fail(f"X must be float32 (T, N, I), got {x.dtype} {x.shape}")
        t, n, i = x.shape
        r_arr = np.asarray(R)
        self.hidden = self.hidden_size if self.hidden_size is not None else (r_arr.shape[1] if r_arr.ndim == 3 else 0)
        hs, d = self.hidden, self.num_dirs
        w, w_s = self._weights_of(W, W_scale, W_zero_point, i, "W")
        r, r_s = self._weights_of(R, R_scale, R_zero_point, hs, "R")
        b = np.zeros((d, 8 * hs), np.float32) if B is None else np.asarray(B, dtype=np.float32)
        p = np.zeros((d, 3 * hs), np.float32) if P is None else np.asarray(P, dtype=np.float32)
        if b.shape != (d, 8 * hs) or p.shape != (d, 3 * hs):
            raise self.fail(f"B must be {(d, 8 * hs)} and P {(d, 3 * hs)}, got {b.shape}, {p.shape}")
        lens = np.full(n, t, np.int64) if sequence_lens is None else np.asarray(sequence_lens).astype(np.int64)
        if lens.shape != (n,) or np.any(lens < 0) or np.any(lens > t):
            raise self.fail(f"sequence_lens must be ({n},) values in [0, {t}], got {lens.tolist()}")
        states = []
        for k, s in enumerate((initial_h, initial_c)):
            s = np.zeros((d, n, hs), np.float32) if s is None else np.asarray(s, dtype=np.float32)
            if s.shape != (d, n, hs):
                raise self.fail(f"initial state {k} must have shape {(d, n, hs)}, got {s.shape}")
            states.append(s)
        self.check_alloc((t, d, n, hs), np.float32, "Y")
        y = np.zeros((t, d, n, hs), np.float32)
        y_h = np.zeros((d, n, hs), np.float32)
        y_c = np.zeros((d, n, hs), np.float32)
        steps = int(lens.max(initial=0))
        for k, reverse in self.directions():
            xs = _reverse_within(x, lens) if reverse else x
            out, y_h[k], y_c[k] = self._direction(k, xs[:steps], w[k], w_s[k], r[k], r_s[k], b[k], p[k],
                                                  states[0][k], states[1][k], lens)
            y[:steps, k] = _reverse_within(out, lens) if reverse else out
        return [y, y_h, y_c]

    def _direction(self, k, x, w, w_s, r, r_s, b, p, h, c, lens) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One direction over ``x`` (steps, N, I): outputs (steps, N, H), final h and c."""
        f, g, act_h = self.acts[k]
        hs = self.hidden
        steps, n = x.shape[:2]
        out = np.zeros((steps, n, hs), np.float32)
        final_h = np.zeros((n, hs), np.float32)
        final_c = np.zeros((n, hs), np.float32)
        if steps == 0:
            return out, final_h, final_c
        xq, x_scale, x_max = quantize_rows(x.reshape(steps * n, -1))
        xw = (_as_f32(exact_product(xq, x_max, w)) * (x_scale * w_s)).reshape(steps, n, 4 * hs)
        bias = b[:4 * hs] + b[4 * hs:]
        bi, bo, bf, bc = (bias[j * hs:(j + 1) * hs] for j in range(4))
        pi, po, pf = p[:hs], p[hs:2 * hs], p[2 * hs:]
        h_prev = h
        for step in range(steps):
            hq, h_scale, h_max = quantize_rows(h_prev)
            gates = xw[step] + _as_f32(exact_product(hq, h_max, r)) * (h_scale * r_s)
            gi = f(self.clipped(gates[:, :hs] + c * pi + bi))
            gf = 1 - gi if self.input_forget else f(self.clipped(gates[:, 2 * hs:3 * hs] + c * pf + bf))
            gc = g(self.clipped(gates[:, 3 * hs:] + bc))
            active = (step < lens)[:, None]
            c = np.where(active, gf * c + gi * gc, c).astype(np.float32)
            go = f(self.clipped(gates[:, hs:2 * hs] + c * po + bo))
            h_new = np.where(active, go * act_h(c), np.float32(0)).astype(np.float32)
            out[step] = h_new
            last = (step + 1 == lens)[:, None]
            final_h = np.where(last, h_new, final_h)
            final_c = np.where(last, c, final_c)
            h_prev = h_new
        return out, final_h, final_c


def _as_f32(acc: np.ndarray) -> np.ndarray:
    """Exact integer sums (float32 or float64) as the float32 of ORT's int32
    accumulator (the same rounding: every sum is below 2**31 in magnitude for
    K < 33,000 rows; beyond that int32 would wrap)."""
    return acc if acc.dtype == np.float32 else acc.astype(np.float32)


def _reverse_within(a: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Each batch column of ``a`` (T, N, ...) reversed within its own length."""
    out = a.copy()
    for j, ln in enumerate(lens.tolist()):
        if ln:
            out[:ln, j] = a[:ln, j][::-1]
    return out
