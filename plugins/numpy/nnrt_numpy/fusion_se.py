"""Squeeze-and-excitation blocks as one fused step of the NumPy program:

    s = GlobalAveragePool(x)           (or ReduceMean over axes 2, 3 with keepdims)
    s = Conv1x1(s) [-> Relu]           (C -> M channels, constant weights)
    s = Conv1x1(s) -> HardSigmoid      (M -> C channels, constant weights)
    y = Mul(x, s)

(MobileNetV3, PP-LCNet, PP-OCR).  Unfused these are five or six steps on
(N, C, 1, 1) vectors, each costing more in per-step overhead than its
arithmetic (about 80 us per block; 7 blocks in PP-OCR cls).  The fused step
computes the same NumPy operations on the same shapes in the same order (the
pooled sum and division, the pointwise Conv kernel's ``(1, M, C) @ (N, 1, C,
1)`` product and bias, the Relu / HardSigmoid tails, the broadcast Mul), so
its output equals the unfused nodes' bit for bit.  PaddlePaddle's exports
(PP-OCRv5/v6) spell the pooling as ``ReduceMean(axes=[2, 3], keepdims=1)``;
that block is taken too (the mean then matches the ReduceMean kernel's to
float rounding: numpy's ``mean`` over two axes sums in another order).

Every intermediate value must have exactly one reader and not be a graph
output; the weights must be constants of the input's float dtype.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nnrt_core.ir import Graph, Node, Value

from nnrt_numpy.fusion_tails import apply_hard, hard_tail
from nnrt_numpy.graph_facts import value_dtype, value_readers

__all__ = ["SEChain", "find_se", "one_reader", "pointwise_conv"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


class SEChain:
    """One fused squeeze-and-excitation block (the interface of :class:`nnrt_numpy.fusion.Chain`)."""

    accepts_out = True

    def __init__(self, nodes: list[Node], x: Value, convs: list[tuple[np.ndarray, np.ndarray | None]],
                 relu: bool, hsig: tuple) -> None:
        self.nodes = nodes
        self.inputs = [x]
        self.nhead = 1
        self.output = nodes[-1].outputs[0]
        # as the Conv kernel prepares them: weights (1, out, in), bias (out, 1)
        self.convs = [(np.ascontiguousarray(w.reshape(1, w.shape[0], w.shape[1])),
                       None if b is None else b.reshape(-1, 1)) for w, b in convs]
        self.relu = relu
        self.hsig = hsig

    def factors(self, x: np.ndarray) -> np.ndarray:
        """The block's per-channel factors for ``x``: (N, C, 1), after the HardSigmoid."""
        n, c = x.shape[:2]
        if x.ndim != 4 or c != self.convs[0][0].shape[2]:
            raise ValueError(f"squeeze-excite input has shape {list(x.shape)}; expected (N, "
                             f"{self.convs[0][0].shape[2]}, H, W)")
        size = math.prod(x.shape[2:])
        s = np.add.reduce(x.reshape(n, c, size), axis=-1)  # GlobalAveragePool
        np.true_divide(s, size, out=s)
        for k, (w, b) in enumerate(self.convs):
            s = np.matmul(w, s.reshape(n, 1, w.shape[2], 1)).reshape(n, w.shape[1], 1)
            if b is not None:
                s += b
            if k == 0 and self.relu:
                np.maximum(s, s.dtype.type(0), out=s)
        apply_hard(self.hsig, s)
        return s

    def run(self, x: np.ndarray, out: np.ndarray | None = None) -> tuple[np.ndarray]:
        s = self.factors(x)
        n, c = x.shape[:2]
        size = math.prod(x.shape[2:])
        if x.flags.c_contiguous and (out is None or out.flags.c_contiguous):
            # as (N * C, H * W) rows times a column: the same products, numpy's broadcast loop over
            # (H, W) costs up to 1.4x more (8 x 200 x 2 x 96: 99 -> 70 us)
            y = np.multiply(x.reshape(n * c, size), s.reshape(n * c, 1),
                            out=None if out is None else out.reshape(n * c, size))
            return (y.reshape(x.shape) if out is None else out,)
        y = np.multiply(x, s.reshape(n, c, 1, 1), out=out)
        return (y,)

    def __call__(self, x: np.ndarray, out: np.ndarray | None = None) -> tuple[np.ndarray]:
        return self.run(x, out=out)


def one_reader(readers: dict[int, list], v: Value) -> Node | None:
    """The one node reading ``v`` (``readers`` from :func:`value_readers`), else ``None``."""
    users = readers.get(id(v), [])
    return users[0] if len(users) == 1 and users[0] is not None else None


def pointwise_conv(node: Node | None, src: Value, cin: int, dt: np.dtype, unit_strides: bool = False,
                   ) -> tuple[np.ndarray, np.ndarray | None] | None:
    """(weights, bias) of a 1x1, group-1, unpadded Conv reading ``src`` with ``cin`` channels,
    constant float weights (and bias) of dtype ``dt``; with ``unit_strides`` also stride 1
    (an SE block's own convs see a 1x1 map, where strides do not matter)."""
    if node is None or node.op_type != "Conv" or node.domain not in ("", "ai.onnx") or node.inputs[0] is not src:
        return None
    a = node.attributes
    if (a["group"].value if "group" in a else 1) != 1 or len(node.outputs) != 1:
        return None
    if "auto_pad" in a and a["auto_pad"].value not in ("NOTSET", "VALID", b"NOTSET", b"VALID"):
        return None
    if "pads" in a and any(a["pads"].value) or "kernel_shape" in a and list(a["kernel_shape"].value) != [1, 1]:
        return None
    if unit_strides and "strides" in a and any(v != 1 for v in a["strides"].value):
        return None
    w = node.inputs[1] if len(node.inputs) > 1 else None
    if w is None or w.const is None or w.const.dtype != dt or w.const.ndim != 4:
        return None
    if w.const.shape[1] != cin or w.const.shape[2:] != (1, 1):
        return None
    b = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] is not None and node.inputs[2].name else None
    if b is not None and (b.const is None or b.const.dtype != dt or b.const.shape != (w.const.shape[0],)):
        return None
    return w.const, None if b is None else b.const


def _match(gap: Node, readers: dict[int, list]) -> SEChain | None:
    x = gap.inputs[0] if gap.inputs else None
    dt = value_dtype(x)
    if dt not in _FLOATS or x.shape is None or len(x.shape) != 4 or not isinstance(x.shape[1], int):
        return None
    c = x.shape[1]
    nodes = [gap]
    c1 = one_reader(readers, gap.outputs[0])
    conv1 = pointwise_conv(c1, gap.outputs[0], c, dt)
    if conv1 is None:
        return None
    nodes.append(c1)
    cur = c1.outputs[0]
    nxt = one_reader(readers, cur)
    relu = nxt is not None and nxt.op_type == "Relu" and nxt.domain in ("", "ai.onnx")
    if relu:
        nodes.append(nxt)
        cur = nxt.outputs[0]
        nxt = one_reader(readers, cur)
    conv2 = pointwise_conv(nxt, cur, conv1[0].shape[0], dt)
    if conv2 is None or conv2[0].shape[0] != c:
        return None
    nodes.append(nxt)
    hs = one_reader(readers, nxt.outputs[0])
    tail = hard_tail(hs, dt) if hs is not None and hs.domain in ("", "ai.onnx") else None
    if tail is None or tail[0] != "hsig" or hs.inputs[0] is not nxt.outputs[0]:
        return None
    nodes.append(hs)
    mul = one_reader(readers, hs.outputs[0])
    if mul is None or mul.op_type != "Mul" or mul.domain not in ("", "ai.onnx") or mul.opset < 7:
        return None
    if len(mul.inputs) != 2 or {id(v) for v in mul.inputs} != {id(x), id(hs.outputs[0])}:
        return None
    if value_dtype(mul.outputs[0]) != dt:  # its shape is x's: s is (N, C, 1, 1)
        return None
    nodes.append(mul)
    return SEChain(nodes, x, [conv1, conv2], relu, tail)


def _is_spatial_mean(node: Node) -> bool:
    """GlobalAveragePool, or ReduceMean of a 4-D input over axes 2 and 3 keeping the dimensions."""
    if node.domain not in ("", "ai.onnx") or node.subgraphs() or len(node.outputs) != 1 or not node.inputs:
        return False
    if node.op_type == "GlobalAveragePool":
        return True
    if node.op_type != "ReduceMean" or (node.attributes["keepdims"].value if "keepdims" in node.attributes else 1) != 1:
        return False
    x = node.inputs[0]
    if x is None or x.shape is None or len(x.shape) != 4:
        return False
    if (node.opset or 1) >= 18:
        ax = node.inputs[1] if len(node.inputs) > 1 else None
        axes = None if ax is None or ax.const is None else [int(a) for a in np.asarray(ax.const).reshape(-1)]
    else:
        axes = list(node.attributes["axes"].value) if "axes" in node.attributes else None
    return axes is not None and sorted(a % 4 for a in axes) == [2, 3] and len(axes) == 2


def find_se(graph: Graph, readers: dict[int, list] | None = None) -> list[SEChain]:
    """The squeeze-and-excitation blocks of ``graph`` (nodes in graph order, none shared);
    ``readers``: the graph's ``value_readers`` when the caller has them."""
    readers = readers if readers is not None else value_readers(graph)
    index = {id(n): i for i, n in enumerate(graph.nodes)}
    found: list[SEChain] = []
    for node in graph.nodes:
        if node.op_type not in ("GlobalAveragePool", "ReduceMean") or not _is_spatial_mean(node):
            continue
        se = _match(node, readers)
        if se is not None and all(index[id(a)] < index[id(b)] for a, b in zip(se.nodes, se.nodes[1:])):
            found.append(se)
    return found
