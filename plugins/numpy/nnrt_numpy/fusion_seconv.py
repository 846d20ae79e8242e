"""A squeeze-and-excitation block and the 1x1 Conv that reads its output, as one step.

MobileNetV3 / PP-LCNet blocks end ``y = x * s`` (s: the block's (N, C, 1, 1) factors,
:mod:`nnrt_numpy.fusion_se`) followed by a pointwise projection ``z = W @ y + b``.  Since
``W @ (x * s) = (W * s^T) @ x``, the step scales the Conv's weights per image (N x M x C
values) instead of the feature map (N x C x H x W values, the larger one in these blocks:
PP-OCR cls b8 8 x 32 x 200 against 8 x 200 x 192) and never writes ``y``.  The Conv's own fused
tails (a residual Add, hard-swish, a folded BatchNorm... from :func:`nnrt_numpy.fusion.find_chains`)
run after it as in its chain.  The sums are rounded in another order than unfused (``w * s`` is
rounded before the product), so results agree to float32 rounding, not bit for bit.

Taken when the block's output has exactly one reader, a 1x1 Conv with stride 1, no padding,
group 1, constant float weights (and bias) of the block's dtype over its channels.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from nnrt_core.ir import Node, Value

from nnrt_numpy import parallel
from nnrt_numpy.fusion import Chain, apply_ops
from nnrt_numpy.fusion_se import SEChain, one_reader, pointwise_conv

__all__ = ["SEConvChain", "merge_se_conv"]


class SEConvChain:
    """A fused SE block followed by its 1x1 Conv (and that Conv's tails): the interface of
    :class:`nnrt_numpy.fusion.Chain` (``nodes``, ``inputs``, ``output``, ``run``)."""

    accepts_out = True

    def __init__(self, se: SEChain, after: list[Node], w: np.ndarray, b: np.ndarray | None,
                 ops: list[tuple], extra: list[Value | None]) -> None:
        self.se = se
        self.nodes = se.nodes + after
        self.inputs = [se.inputs[0]] + extra  # x, then the Conv chain's inputs after its head input
        self.nhead = 1
        self.output = after[-1].outputs[0]
        self.w = np.ascontiguousarray(w.reshape(1, w.shape[0], w.shape[1]))  # (1, M, C)
        self.bias = None if b is None else np.ascontiguousarray(b.reshape(-1, 1))
        self.ops = ops

    def run(self, x: np.ndarray, *rest: Any, out: np.ndarray | None = None) -> tuple[np.ndarray]:
        s = self.se.factors(x)  # (N, C, 1); checks x's shape
        n, c = x.shape[:2]
        ws = np.multiply(self.w, s.reshape(n, 1, c))  # (N, M, C): W scaled per image
        y = parallel.matmul(ws, x.reshape(n, c, math.prod(x.shape[2:])))  # split when large and cores idle
        if self.bias is not None:
            y += self.bias
        y = apply_ops(self.ops, y.reshape((n, self.w.shape[1]) + x.shape[2:]), (None,) + rest)
        if out is not None:
            np.copyto(out, y)
            return (out,)
        return (y,)

    def __call__(self, *args: Any, out: np.ndarray | None = None) -> tuple[np.ndarray]:
        return self.run(*args, out=out)


def merge_se_conv(chains: Sequence[Any], readers: dict[int, list]) -> list[Any]:
    """``chains`` (from :func:`nnrt_numpy.fusion.find_chains`) with every SE block whose output
    feeds one 1x1 Conv merged with that Conv (and the Conv's chain, when it heads one)."""
    head_of = {id(ch.nodes[0]): ch for ch in chains if isinstance(ch, Chain)}
    merged: list[Any] = []
    used: set[int] = set()
    for ch in chains:
        if not isinstance(ch, SEChain):
            continue
        conv = one_reader(readers, ch.output)
        proj = pointwise_conv(conv, ch.output, ch.inputs[0].shape[1], ch.convs[0][0].dtype, unit_strides=True)
        if proj is None:
            continue
        conv_chain = head_of.get(id(conv))
        w, b = proj[0].reshape(proj[0].shape[:2]), proj[1]
        if conv_chain is None:
            fused = SEConvChain(ch, [conv], w, b, [], [])
        else:
            if 1 in conv_chain.overrides:  # affine tails folded into the Conv's weights
                w = conv_chain.overrides[1].reshape(w.shape)
                b = conv_chain.overrides.get(2, b)
            extra = list(conv_chain.inputs[1:])
            fused = SEConvChain(ch, list(conv_chain.nodes), w, b, conv_chain.ops, extra)
            used.add(id(conv_chain))
        used.add(id(ch))
        merged.append(fused)
    return [ch for ch in chains if id(ch) not in used] + merged
