"""Run the float model on calibration data and choose each activation's range.

The model is run by an ordinary :class:`~nnrt_core.session.Session` on the
NumPy reference backend, on a copy of the graph whose intermediate tensors of
interest are extra graph outputs.  ``minmax`` needs one pass; ``percentile``
and ``entropy`` take a second pass that fills, per tensor, a histogram over
``[-max|x|, max|x|]`` (``num_bins`` bins per sign) sized from the first pass.

* minmax: the observed ``[min, max]``.
* percentile: ``[q(100-p), q(p)]`` of the values (asymmetric) or ``q(p)`` of
  ``|x|`` (symmetric), read from the histogram.
* entropy: the threshold ``T`` whose 128-level quantization of the ``|x|``
  histogram has the smallest KL divergence from the clipped distribution (the
  TensorRT calibrator); the range is ``[max(min, -T), min(max, T)]``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import QuantizationError
from nnrt_core.ir import Graph, Model
from nnrt_core.ir.clone import clone_graph
from nnrt_core.quantization.config import QuantizationConfig
from nnrt_core.quantization.data import CalibrationSet
from nnrt_core.quantization.progress import Progress
from nnrt_core.registry import Registry, default_registry

__all__ = ["TensorStats", "calibrate", "choose_range", "kl_threshold"]

#: quantization levels of one sign the entropy calibrator compares against (int8)
KL_LEVELS = 128


@dataclass
class TensorStats:
    """What calibration saw of one tensor."""

    name: str
    min: float = np.inf
    max: float = -np.inf
    count: int = 0
    hist: np.ndarray | None = field(default=None, repr=False)  #: 2*bins counts over [-absmax, absmax]

    @property
    def absmax(self) -> float:
        return float(max(abs(self.min), abs(self.max))) if self.count else 0.0

    def observe(self, x: np.ndarray) -> None:
        if x.size == 0:
            return
        lo, hi = float(x.min()), float(x.max())
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise QuantizationError(f"tensor {self.name!r} holds NaN/inf on the calibration data; its range cannot "
                                    "be quantized (check the model and the data)")
        self.min, self.max = min(self.min, lo), max(self.max, hi)
        self.count += int(x.size)

    def observe_hist(self, x: np.ndarray, bins: int) -> None:
        if self.hist is None:
            self.hist = np.zeros(2 * bins, np.int64)
        a = self.absmax
        if x.size == 0 or a == 0.0:
            self.hist[bins] += x.size
            return
        idx = np.floor((x.astype(np.float64).ravel() + a) * (bins / a)).astype(np.int64)
        np.clip(idx, 0, 2 * bins - 1, out=idx)
        self.hist += np.bincount(idx, minlength=2 * bins)

    def folded(self) -> np.ndarray:
        """Histogram of ``|x|`` over ``[0, absmax]`` (``bins`` bins)."""
        assert self.hist is not None
        b = len(self.hist) // 2
        return self.hist[b:] + self.hist[:b][::-1]


def kl_threshold(hist: np.ndarray, levels: int = KL_LEVELS) -> int:
    """Number of leading bins of the ``|x|`` histogram ``hist`` to keep (the
    clipping threshold, in bins) minimising KL(P || Q), where P is the clipped
    distribution (outliers folded into the last kept bin) and Q its
    ``levels``-level quantization (TensorRT's entropy calibration, as in
    NVIDIA's pytorch-quantization: the zero bin is flattened to its
    neighbour so that the spike of ReLU zeros does not decide the threshold,
    and the largest of equally good thresholds wins)."""
    hist = np.asarray(hist, np.float64).copy()
    nbins = len(hist)
    if nbins <= levels:
        return nbins
    if nbins > 1:
        hist[0] = hist[1]
    nz_last = int(np.flatnonzero(hist)[-1]) + 1 if hist.any() else 0
    if nz_last <= levels:
        return max(nz_last, 1)
    suffix = np.concatenate([np.cumsum(hist[::-1])[::-1], [0.0]])  # suffix[i] = hist[i:].sum()
    best_i, best_kl = nbins, np.inf
    stride = max(1, (nbins - levels) // 640)  # at most ~640 candidates (3 bins of 2048 apart)
    candidates = list(range(levels, nbins + 1, stride))
    if candidates[-1] != nbins:
        candidates.append(nbins)
    for i in candidates:
        ref = hist[:i].copy()
        ref[-1] += suffix[i]
        src = hist[:i]
        nz = src != 0
        edges = (np.arange(levels + 1) * i) // levels
        sums = np.add.reduceat(src, edges[:-1])
        cnt = np.add.reduceat(nz.astype(np.float64), edges[:-1])
        per = np.divide(sums, cnt, out=np.zeros_like(sums), where=cnt > 0)
        q = np.repeat(per, np.diff(edges)) * nz
        p_tot, q_tot = ref.sum(), q.sum()
        if p_tot == 0 or q_tot == 0:
            continue
        p = ref / p_tot
        q = q / q_tot
        mask = p > 0
        qm = np.where(q[mask] > 0, q[mask], 1e-12)  # P mass where Q has none: heavy but finite penalty
        kl = float(np.sum(p[mask] * np.log(p[mask] / qm)))
        if kl <= best_kl:
            best_kl, best_i = kl, i
    return best_i


def choose_range(st: TensorStats, cfg: QuantizationConfig) -> tuple[float, float]:
    """The clipping range ``(lo, hi)`` of one tensor for ``cfg.method``."""
    if st.count == 0:
        raise QuantizationError(f"tensor {st.name!r} was never computed during calibration")
    lo, hi, a = st.min, st.max, st.absmax
    if cfg.method == "minmax" or a == 0.0:
        return (-a, a) if cfg.symmetric else (lo, hi)
    assert st.hist is not None
    bins = len(st.hist) // 2
    width = a / bins
    if cfg.method == "percentile":
        frac = cfg.percentile / 100.0
        if cfg.symmetric:
            cdf = np.cumsum(st.folded()) / st.count
            k = int(np.searchsorted(cdf, frac - 1e-12))
            t = min((k + 1) * width, a)
            return -t, t
        cdf = np.cumsum(st.hist) / st.count
        k_lo = int(np.searchsorted(cdf, 1.0 - frac - 1e-12))
        k_hi = int(np.searchsorted(cdf, frac - 1e-12))
        return max(lo, -a + k_lo * width), min(hi, -a + (k_hi + 1) * width)
    # entropy: a non-negative tensor quantized asymmetrically uses all 256 levels on one side
    levels = 2 * KL_LEVELS if lo >= 0 and not cfg.symmetric else KL_LEVELS
    t = kl_threshold(st.folded(), levels) * width
    return (-t, t) if cfg.symmetric else (max(lo, -t), min(hi, t))


def _exposing_model(graph: Graph, names: Sequence[str]) -> tuple[Model, list[str]]:
    """A copy of ``graph`` whose tensors ``names`` are graph outputs too."""
    g = clone_graph(graph)
    vm = g.value_map()
    inputs = {v.name for v in g.inputs}
    have = {v.name for v in g.outputs}
    exposed = []
    for n in names:
        if n in inputs:
            continue
        v = vm.get(n)
        if v is None:  # pragma: no cover - names come from the same graph
            raise QuantizationError(f"tensor {n!r} is not in the model")
        if n not in have:
            g.outputs.append(v)
            have.add(n)
        exposed.append(n)
    return Model(graph=g), exposed


def calibrate(graph: Graph, names: Sequence[str], data: CalibrationSet, cfg: QuantizationConfig, *,
              registry: Registry | None = None, progress: bool | None = None,
              on_run: Callable[[], None] | None = None) -> dict[str, TensorStats]:
    """Statistics of the tensors ``names`` of ``graph`` over the calibration set."""
    from nnrt_core.session import Session  # the session is this tool's client API (imported when used)

    model, exposed = _exposing_model(graph, names)
    registry = registry if registry is not None else default_registry()
    host = registry.host_evaluator()
    if host is None:
        raise QuantizationError("calibration runs the model on a host backend that evaluates constants "
                                "(Backend.evaluates_constants, e.g. 'numpy'); none is available")
    sess = Session(model, ScheduleConfig(backends=[host.name], backup=host.name, optimization_level="none"),
                   registry=registry)
    inputs = {v.name for v in graph.inputs}
    stats = {n: TensorStats(n) for n in names}
    passes = 2 if cfg.method in ("percentile", "entropy") else 1
    total = passes * len(data.feeds)
    desc = f"calibrating ({cfg.method}" + (f", pass 1/{passes})" if passes > 1 else ")")
    with Progress(total, desc, enabled=progress) as bar:
        for pass_no in range(passes):
            if pass_no > 0:
                bar.set_description(f"calibrating ({cfg.method}, pass {pass_no + 1}/{passes})")
            for feeds in data.feeds:
                outs = sess.run(feeds, exposed) if exposed else {}
                for n in names:
                    x = feeds[n] if n in inputs else outs[n]
                    x = np.asarray(x)
                    if pass_no == 0:
                        stats[n].observe(x)
                    else:
                        stats[n].observe_hist(x, cfg.num_bins)
                bar.update()
                if on_run is not None:
                    on_run()
    return stats
