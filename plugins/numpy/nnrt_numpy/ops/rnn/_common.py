"""Shared machinery of RNN, GRU and LSTM: attribute parsing (directions,
activation functions with their alpha/beta), layout handling, the input
projection of all time steps at once, and the time loop with
``sequence_lens`` masking."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo
from nnrt_numpy.mlas_act import logistic_float32, tanh_float32

Activation = Callable[[np.ndarray], np.ndarray]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # 0.5 * (1 + tanh(x / 2)) is the overflow-free logistic function.
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0, x).astype(x.dtype, copy=False)


# name -> (number of alphas/betas used, default alpha, default beta, factory)
_ACTIVATIONS: dict[str, tuple[int, float, float, Callable[[float, float], Activation]]] = {
    "relu": (0, 0.0, 0.0, lambda a, b: lambda x: np.maximum(x, 0)),
    "tanh": (0, 0.0, 0.0, lambda a, b: np.tanh),
    "sigmoid": (0, 0.0, 0.0, lambda a, b: _sigmoid),
    "affine": (2, 1.0, 0.0, lambda a, b: lambda x: a * x + b),
    "leakyrelu": (1, 0.01, 0.0, lambda a, b: lambda x: np.where(x >= 0, x, a * x)),
    "thresholdedrelu": (1, 1.0, 0.0, lambda a, b: lambda x: np.where(x > a, x, 0)),
    "scaledtanh": (2, 1.0, 1.0, lambda a, b: lambda x: a * np.tanh(b * x)),
    "hardsigmoid": (2, 0.2, 0.5, lambda a, b: lambda x: np.clip(a * x + b, 0, 1)),
    "elu": (1, 1.0, 0.0, lambda a, b: lambda x: np.where(x >= 0, x, a * (np.exp(np.minimum(x, 0)) - 1))),
    "softsign": (0, 0.0, 0.0, lambda a, b: lambda x: x / (1 + np.abs(x))),
    "softplus": (0, 0.0, 0.0, lambda a, b: _softplus),
}


#: ONNX Runtime's own (MLAS) functions, for kernels whose reference is ORT (``_mlas_acts``)
_MLAS_ACTIVATIONS: dict[str, Activation] = {"tanh": tanh_float32, "sigmoid": logistic_float32}


class RecurrentBase(Kernel):
    """Common attribute handling; subclasses set ``_gates`` and ``_default_acts``
    and implement ``_run(x, w, r, b, lens, states)``.  ``_mlas_acts``: Sigmoid
    and Tanh are ONNX Runtime's MLAS approximations (``nnrt_numpy.mlas_act``),
    bit for bit, for a contrib op whose only definition is ORT's kernel."""

    _gates: int = 1
    _default_acts: tuple[str, ...] = ("Tanh",)
    _mlas_acts = False
    _has_layout = False
    _num_states = 1

    def _setup(self, node: NodeInfo) -> None:
        direction = node.attr("direction", "forward")
        direction = direction.decode() if isinstance(direction, bytes) else direction
        if direction not in ("forward", "reverse", "bidirectional"):
            raise self.fail(f"direction must be forward, reverse or bidirectional, got {direction!r}")
        self.direction = direction
        self.num_dirs = 2 if direction == "bidirectional" else 1
        hs = node.attr("hidden_size")
        self.hidden_size = None if hs is None else int(hs)
        if self.hidden_size is not None and self.hidden_size <= 0:
            raise self.fail(f"hidden_size must be positive, got {self.hidden_size}")
        clip = node.attr("clip")
        self.clip = None if clip is None else float(clip)
        if self.clip is not None and self.clip <= 0:
            raise self.fail(f"clip must be positive, got {self.clip}")
        self.layout = int(node.attr("layout", 0)) if self._has_layout else 0
        if self.layout not in (0, 1):
            raise self.fail(f"layout must be 0 or 1, got {self.layout}")
        self.acts = self._parse_activations(node)

    def _parse_activations(self, node: NodeInfo) -> list[list[Activation]]:
        per_dir = len(self._default_acts)
        names = node.attr("activations")
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in names] if names else None
        if names is None:
            names = list(self._default_acts) * self.num_dirs
        elif len(names) == per_dir and self.num_dirs == 2:
            names = names * 2
        if len(names) != per_dir * self.num_dirs:
            raise self.fail(f"activations must list {per_dir * self.num_dirs} functions, got {len(names)}")
        alphas = [float(a) for a in (node.attr("activation_alpha") or [])]
        betas = [float(b) for b in (node.attr("activation_beta") or [])]
        funcs: list[Activation] = []
        ia = ib = 0
        for name in names:
            spec = _ACTIVATIONS.get(name.lower())
            if spec is None:
                raise self.fail(f"unsupported activation function {name!r}")
            nparams, da, db, factory = spec
            if self._mlas_acts and name.lower() in _MLAS_ACTIVATIONS:
                funcs.append(_MLAS_ACTIVATIONS[name.lower()])
                continue
            a, b = da, db
            if nparams >= 1:
                if ia < len(alphas):
                    a = alphas[ia]
                ia += 1
            if nparams >= 2:
                if ib < len(betas):
                    b = betas[ib]
                ib += 1
            funcs.append(factory(a, b))
        return [funcs[d * per_dir:(d + 1) * per_dir] for d in range(self.num_dirs)]

    # -- helpers for subclasses -------------------------------------------------
    def clipped(self, x: np.ndarray) -> np.ndarray:
        return x if self.clip is None else np.clip(x, -self.clip, self.clip)

    def prepare(
        self, x: np.ndarray, w: np.ndarray, r: np.ndarray, b: np.ndarray | None,
        lens: np.ndarray | None, init: Sequence[np.ndarray | None],
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, list[np.ndarray], np.dtype]:
        """Validate shapes and bring everything to layout 0 in the compute type.

        Returns ``x (T, N, I)``, ``w``, ``r``, ``b (D, 2*G*H)``, ``lens`` (or
        None when all sequences are full), the initial states ``(D, N, H)`` and
        the output dtype."""
        x = np.asarray(x)
        out_dt = x.dtype
        comp = np.float64 if out_dt == np.float64 else np.float32
        if x.ndim != 3:
            raise self.fail(f"X must have rank 3, got shape {x.shape}")
        if self.layout == 1:
            x = x.transpose(1, 0, 2)
        t, n, i = x.shape
        w = np.asarray(w, dtype=comp)
        r = np.asarray(r, dtype=comp)
        g, d = self._gates, self.num_dirs
        h = self.hidden_size if self.hidden_size is not None else r.shape[-1]
        if w.shape != (d, g * h, i):
            raise self.fail(f"W must have shape {(d, g * h, i)}, got {w.shape}")
        if r.shape != (d, g * h, h):
            raise self.fail(f"R must have shape {(d, g * h, h)}, got {r.shape}")
        if b is None:
            b = np.zeros((d, 2 * g * h), dtype=comp)
        else:
            b = np.asarray(b, dtype=comp)
            if b.shape != (d, 2 * g * h):
                raise self.fail(f"B must have shape {(d, 2 * g * h)}, got {b.shape}")
        if lens is not None:
            lens = np.asarray(lens).astype(np.int64)
            if lens.shape != (n,):
                raise self.fail(f"sequence_lens must have shape ({n},), got {lens.shape}")
            if np.any(lens < 0) or np.any(lens > t):
                raise self.fail(f"sequence_lens values must lie in [0, {t}]")
            if np.all(lens == t):
                lens = None
        states = []
        for k, s in enumerate(init):
            if s is None:
                states.append(np.zeros((d, n, h), dtype=comp))
                continue
            s = np.asarray(s, dtype=comp)
            if self.layout == 1:
                s = s.transpose(1, 0, 2)
            if s.shape != (d, n, h):
                raise self.fail(f"initial state {k} must have shape {(d, n, h)} (layout 0), got {s.shape}")
            states.append(s)
        return x.astype(comp, copy=False), w, r, b, lens, states, out_dt

    def scan(
        self, xw: np.ndarray, states: list[np.ndarray], lens: np.ndarray | None, reverse: bool,
        step: Callable[[np.ndarray, list[np.ndarray]], list[np.ndarray]],
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Run ``step`` over time.  ``xw`` holds the input projections
        ``(T, N, G*H)``; ``step(xw_t, states) -> new states`` (the first state
        is the hidden output).  Sequences shorter than ``T`` keep their state
        and emit zeros past their length."""
        t = xw.shape[0]
        h = states[0].shape[-1]
        y = np.zeros((t, xw.shape[1], h), dtype=xw.dtype)
        order = range(t - 1, -1, -1) if reverse else range(t)
        for k in order:
            new = step(xw[k], states)
            if lens is not None:
                valid = (k < lens)[:, None]
                new = [np.where(valid, a, b) for a, b in zip(new, states)]
                y[k] = np.where(valid, new[0], 0)
            else:
                y[k] = new[0]
            states = new
        return y, states

    def finish(self, ys: list[np.ndarray], finals: list[list[np.ndarray]], out_dt: np.dtype) -> list[Any]:
        """Stack directions and apply the output layout."""
        y = np.stack(ys, axis=1)  # (T, D, N, H)
        outs = [np.stack([f[k] for f in finals], axis=0) for k in range(len(finals[0]))]  # (D, N, H)
        if self.layout == 1:
            y = y.transpose(2, 0, 1, 3)
            outs = [o.transpose(1, 0, 2) for o in outs]
        return [y.astype(out_dt, copy=False)] + [o.astype(out_dt, copy=False) for o in outs]

    def directions(self) -> list[tuple[int, bool]]:
        if self.direction == "bidirectional":
            return [(0, False), (1, True)]
        return [(0, self.direction == "reverse")]
