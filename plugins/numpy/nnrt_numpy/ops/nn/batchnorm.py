"""BatchNormalization, all versions.

Before opset 14 the op is evaluated in inference mode (running mean/variance),
as ONNX Runtime does: the training-only outputs of opsets 1-9 are filled with
the running statistics.  Opsets 1-8 also accept per-activation statistics
(``spatial=0``), whose shape is ``(C, D1, ..., Dn)``.  From opset 14,
``training_mode=1`` normalizes with the batch statistics and outputs the
updated running statistics.
"""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


def _channel_shape(param: np.ndarray, rank: int) -> tuple[int, ...]:
    """Broadcast shape placing ``param``'s dims starting at axis 1."""
    return (1,) + param.shape + (1,) * max(rank - 1 - param.ndim, 0)


class _BatchNormInference(Kernel):
    op_type = "BatchNormalization"

    def _setup(self, node: NodeInfo) -> None:
        self.epsilon = float(node.attr("epsilon", 1e-5))
        consts = [node.const(i) for i in range(1, 5)]
        self._consts = consts
        self._affine = self._fold(*consts) if all(c is not None for c in consts) else None

    def _fold(self, scale, bias, mean, var) -> tuple[np.ndarray, np.ndarray]:
        """Fold into ``y = x * a + b``; computed in the statistics' precision."""
        a = scale / np.sqrt(var + var.dtype.type(self.epsilon))
        b = bias - mean * a
        return a, b

    def _inference(self, x, scale, bias, mean, var) -> np.ndarray:
        if self._affine is not None and scale is self._consts[0] and var is self._consts[3]:
            a, b = self._affine
        else:
            a, b = self._fold(scale, bias, mean, var)
        shape = _channel_shape(a, x.ndim)
        y = x * a.astype(x.dtype, copy=False).reshape(shape)
        y += b.astype(x.dtype, copy=False).reshape(shape)
        return y


@register
class BatchNormalization1(_BatchNormInference):
    """Opsets 1-13: inference semantics; extra outputs repeat the running stats."""

    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        super()._setup(node)
        self.num_outputs = node.num_outputs

    def __call__(self, x, scale, bias, mean, var) -> tuple[np.ndarray, ...]:
        if x.ndim < 2:
            raise self.fail("input must have rank >= 2")
        y = self._inference(x, scale, bias, mean, var)
        extra = [mean, var, mean, var][: self.num_outputs - 1]
        return (y, *extra)


@register
class BatchNormalization14(_BatchNormInference):
    """Opset 14+: ``training_mode`` selects batch statistics and running-stat outputs."""

    since_version = 14

    def _setup(self, node: NodeInfo) -> None:
        super()._setup(node)
        self.momentum = float(node.attr("momentum", 0.9))
        self.training = bool(node.attr("training_mode", 0))
        if not self.training and node.num_outputs > 1:
            raise self.fail("outputs running_mean/running_var are only allowed when training_mode=1")

    def __call__(self, x, scale, bias, mean, var) -> tuple[np.ndarray, ...]:
        if x.ndim < 2:
            raise self.fail("input must have rank >= 2")
        if not self.training:
            return (self._inference(x, scale, bias, mean, var),)
        axes = (0,) + tuple(range(2, x.ndim))
        cur_mean = x.mean(axis=axes)
        cur_var = x.var(axis=axes)
        a, b = self._fold(scale, bias, cur_mean.astype(mean.dtype), cur_var.astype(var.dtype))
        shape = _channel_shape(a, x.ndim)
        y = (x * a.astype(x.dtype).reshape(shape) + b.astype(x.dtype).reshape(shape)).astype(x.dtype)
        m = mean.dtype.type(self.momentum)
        run_mean = (mean * m + cur_mean.astype(mean.dtype) * (1 - m)).astype(mean.dtype)
        run_var = (var * m + cur_var.astype(var.dtype) * (1 - m)).astype(var.dtype)
        return (y, run_mean, run_var)
