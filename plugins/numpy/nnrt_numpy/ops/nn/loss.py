"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (reductions none/sum/mean,
optional class weights and ``ignore_index``)."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from .softmax import log_softmax


class _LossBase(Kernel):
    def _setup(self, node: NodeInfo) -> None:
        self.reduction = node.attr("reduction", "mean")
        if self.reduction not in ("none", "sum", "mean"):
            raise self.fail(f"unknown reduction {self.reduction!r}")
        ii = node.attr("ignore_index")
        self.ignore_index = None if ii is None else int(ii)

    def nll(self, logp: np.ndarray, target: np.ndarray, weight: np.ndarray | None) -> np.ndarray:
        """``logp`` is ``(N, C, d...)``, ``target`` is ``(N, d...)``."""
        if logp.ndim < 2 or target.shape != logp.shape[:1] + logp.shape[2:]:
            raise self.fail(f"target shape {target.shape} does not match input {logp.shape}")
        c = logp.shape[1]
        t = target.astype(np.int64)
        ignored = t == self.ignore_index if self.ignore_index is not None else np.zeros(t.shape, dtype=bool)
        safe = np.where(ignored, 0, t)
        if ((safe < 0) | (safe >= c)).any():
            raise self.fail(f"target values must be in [0, {c}) (or ignore_index)")
        if weight is not None and weight.shape != (c,):
            raise self.fail(f"weight has shape {weight.shape}; expected ({c},), one weight per class")
        picked = np.take_along_axis(logp, safe[:, None], axis=1)[:, 0]
        w = np.ones(t.shape, dtype=logp.dtype) if weight is None else weight[safe].astype(logp.dtype)
        w = np.where(ignored, logp.dtype.type(0), w)
        loss = -picked * w
        if self.reduction == "none":
            return loss.astype(logp.dtype, copy=False)
        if self.reduction == "sum":
            return np.asarray(loss.sum(), dtype=logp.dtype)
        den = w.sum()
        with np.errstate(all="ignore"):
            return np.asarray(loss.sum() / den if den != 0 else 0 * loss.sum(), dtype=logp.dtype)


@register
class NegativeLogLikelihoodLoss(_LossBase):
    op_type = "NegativeLogLikelihoodLoss"
    since_version = 12

    def __call__(self, x: np.ndarray, target: np.ndarray, weight: np.ndarray | None = None) -> tuple[np.ndarray]:
        return (self.nll(x, target, weight),)


@register
class SoftmaxCrossEntropyLoss(_LossBase):
    op_type = "SoftmaxCrossEntropyLoss"
    since_version = 12

    def __call__(self, scores: np.ndarray, labels: np.ndarray, weight: np.ndarray | None = None):
        logp = log_softmax(scores, 1) if scores.ndim > 1 else scores
        return (self.nll(logp, labels, weight), logp)
