"""Dropout, all versions.

Inference (``is_test`` before opset 7, no ``training_mode`` input from opset
12, or ratio 0) is the identity with an all-ones mask.  In training mode
(opset 12+) elements are zeroed with probability ``ratio`` and the rest scaled
by ``1 / (1 - ratio)``; masks come from a generator seeded once per node
(``seed`` attribute, default 0).  The mask is float (same type as the data) before opset
10 and bool from opset 10.
"""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register


@register
class Dropout1(Kernel):
    """Opsets 1-11: the ``ratio`` attribute; always inference here."""

    op_type = "Dropout"
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self.ratio = float(node.attr("ratio", 0.5))
        self.want_mask = node.num_outputs > 1
        self.bool_mask = node.opset >= 10

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, ...]:
        if not self.want_mask:
            return (x,)
        mask = np.ones(x.shape, dtype=bool if self.bool_mask else x.dtype)
        return (x, mask)


@register
class Dropout12(Kernel):
    """Opset 12+: ``ratio`` and ``training_mode`` are optional inputs."""

    op_type = "Dropout"
    since_version = 12

    def _setup(self, node: NodeInfo) -> None:
        self.seed = node.attr("seed")
        self.want_mask = node.num_outputs > 1
        # legacy RandomState: with the same seed it reproduces the ONNX reference masks
        self._rng = np.random.RandomState(0 if self.seed is None else int(self.seed) & 0xFFFFFFFF)

    def __call__(self, x: np.ndarray, ratio: np.ndarray | None = None,
                 training_mode: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        for name, v in (("ratio", ratio), ("training_mode", training_mode)):
            if v is not None and np.size(v) != 1:
                raise self.fail(f"input {name!r} has shape {list(np.shape(v))}; expected a scalar")
        r = 0.5 if ratio is None else float(np.asarray(ratio).reshape(()))
        if not 0 <= r < 1:
            raise self.fail(f"ratio must be in [0, 1), got {r}")
        training = training_mode is not None and bool(np.asarray(training_mode).reshape(()))
        if not training or r == 0:
            if not self.want_mask:
                return (x,)
            return (x, np.ones(x.shape, dtype=bool))
        mask = self._rng.uniform(0, 1, x.shape) >= r
        y = (x * mask / x.dtype.type(1 - r)).astype(x.dtype, copy=False)
        return (y, mask) if self.want_mask else (y,)
