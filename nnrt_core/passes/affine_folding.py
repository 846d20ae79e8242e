"""Folding per-channel affine ops into the Conv or BatchNormalization before them.

* ``Conv -> BatchNormalization``: the BN scale goes into the weights and its
  shift into the bias (``W' = W * s``, ``B' = (B - mean) * s + beta`` with
  ``s = gamma / sqrt(var + eps)``), as ONNX Runtime does at its basic level.
* ``Conv | BatchNormalization -> Mul/Add/Sub/Div`` by a per-channel (or
  scalar) constant: scales or shifts the weights/bias of the Conv, or the
  scale/bias of the BN (Caffe2 exports write BN as BN + Mul + Add).

Conditions: every parameter is an initializer of a floating type, the first
node's output is read only by the second (not a graph output, not read by a
sub-graph), and the BN runs in inference mode with one output.  Arithmetic is
done in float64 and cast back to the weights' type.  The merged node writes
the second node's output value, so names downstream are unchanged.
"""
from __future__ import annotations

import numpy as np

from nnrt_core.ir import Graph, Node, Value
from nnrt_core.passes.base import Pass, PassContext, PassResult
from nnrt_core.passes.rewrite import GraphEditor, is_constant

__all__ = ["AffineFolding"]

_ELEMENTWISE = ("Mul", "Add", "Sub", "Div")
#: the ops that can fold into each kind of first node
_FOLLOWERS = {"Conv": ("BatchNormalization",) + _ELEMENTWISE, "BatchNormalization": _ELEMENTWISE}


def _float_const(v: Value | None) -> np.ndarray | None:
    if not is_constant(v) or v.const.dtype.kind != "f":  # type: ignore[union-attr]
        return None
    return v.const  # type: ignore[union-attr]


def _conv_params(node: Node) -> tuple[np.ndarray, np.ndarray | None] | None:
    """(W, B) of a Conv with constant weights (and bias), else None."""
    if node.op_type != "Conv" or node.domain != "" or len(node.outputs) != 1:
        return None
    w = _float_const(node.inputs[1] if len(node.inputs) > 1 else None)
    if w is None or w.ndim < 3:
        return None
    bv = node.inputs[2] if len(node.inputs) > 2 else None
    if bv is None:
        return w, None
    b = _float_const(bv)
    if b is None or b.shape != (w.shape[0],) or b.dtype != w.dtype:
        return None
    return w, b


def _bn_params(node: Node) -> dict[str, np.ndarray] | None:
    """scale, bias, mean, var and eps of an inference-mode BN with constant
    per-channel parameters, else None."""
    if node.op_type != "BatchNormalization" or node.domain != "" or len(node.inputs) < 5:
        return None
    if any(v.name for v in node.outputs[1:]) or node.attr("training_mode", 0) or node.attr("spatial", 1) != 1:
        return None
    if (node.opset or 1) < 7 and node.attr("is_test", 0) == 0:
        return None  # opset 1-6 BN with is_test=0 is the training form
    arrays = [_float_const(v) for v in node.inputs[1:5]]
    if any(a is None or a.ndim != 1 for a in arrays):
        return None
    scale, bias, mean, var = arrays
    if len({a.shape for a in arrays}) != 1 or len({a.dtype for a in arrays}) != 1:  # type: ignore[union-attr]
        return None
    return {"scale": scale, "bias": bias, "mean": mean, "var": var,  # type: ignore[dict-item]
            "eps": np.float64(node.attr("epsilon", 1e-5))}


def _per_channel(c: np.ndarray, rank: int, channels: int) -> np.ndarray | None:
    """``c`` as a (channels,) float64 vector when broadcasting it against a
    rank-``rank`` tensor with ``channels`` channels (axis 1) acts per channel
    and keeps the tensor's shape; else None."""
    if c.ndim > rank or rank < 2:
        return None
    shape = (1,) * (rank - c.ndim) + tuple(c.shape)
    if any(d != 1 for i, d in enumerate(shape) if i != 1) or shape[1] not in (1, channels):
        return None
    return np.broadcast_to(c.astype(np.float64).reshape(-1), (channels,))


class AffineFolding(Pass):
    """Conv+BatchNormalization folding and per-channel Mul/Add/Sub/Div
    absorption into a preceding Conv or BatchNormalization."""

    name = "conv_bn_folding"
    level = "basic"
    description = "fold BatchNormalization and per-channel Mul/Add into the Conv (or BN) before it"
    requires_ops = (frozenset({"Conv", "BatchNormalization"}), frozenset({"BatchNormalization", *_ELEMENTWISE}))

    def run(self, graph: Graph, ctx: PassContext | None = None) -> PassResult:
        ctx = ctx or PassContext()
        res = self.result()
        ed = GraphEditor(graph)
        for node in list(graph.nodes):
            if node.graph is not graph or node.op_type not in ("Conv", "BatchNormalization"):
                continue
            while True:  # keep absorbing: Conv -> BN -> Mul -> Add becomes one Conv
                nxt = ed.sole_reader(node.outputs[0]) if node.outputs and node.outputs[0].name else None
                if nxt is None or not ctx.may_rewrite(node, nxt) or not self._absorb(ed, node, nxt):
                    break
                res.record(f"folded {nxt.op_type} {nxt.name!r} into {node.op_type} {node.name!r}", removed=1)
        if res.changed:
            ed.drop_unread_initializers()
        return res

    # -- one rewrite --------------------------------------------------------
    def _absorb(self, ed: GraphEditor, node: Node, nxt: Node) -> bool:
        if nxt.op_type not in _FOLLOWERS[node.op_type]:  # a Relu, a Pad...: no parameter read (most Convs)
            return False
        if node.op_type == "Conv":
            params = _conv_params(node)
            if params is None:
                return False
            w, b = params
            if nxt.op_type == "BatchNormalization":
                new = self._conv_bn(w, b, nxt)
            else:
                new = self._conv_elementwise(w, b, node.outputs[0], nxt)
            if new is None:
                return False
            w2, b2 = new
            self._set_param(ed, node, 1, w2, "_folded")
            if b2 is not None:
                self._set_param(ed, node, 2, b2, "_folded")
        else:
            bn = _bn_params(node)
            if bn is None or nxt.op_type not in _ELEMENTWISE:
                return False
            rank = node.outputs[0].type.rank if node.outputs[0].type is not None else None  # type: ignore[union-attr]
            if rank is None and node.inputs[0] is not None and node.inputs[0].shape is not None:
                rank = len(node.inputs[0].shape)  # type: ignore[arg-type]
            c = self._channel_operand(node.outputs[0], nxt, rank, len(bn["scale"]), bn["scale"].dtype)
            if c is None:
                return False
            op, vec = c
            scale, bias = bn["scale"].astype(np.float64), bn["bias"].astype(np.float64)
            if op == "Mul":
                scale, bias = scale * vec, bias * vec
            else:
                bias = bias + vec
            self._set_param(ed, node, 1, scale.astype(bn["scale"].dtype), "_folded")
            self._set_param(ed, node, 2, bias.astype(bn["bias"].dtype), "_folded")
        out = nxt.outputs[0]
        ed.detach(nxt)
        ed.adopt_output(node, 0, out)
        return True

    @staticmethod
    def _conv_bn(w: np.ndarray, b: np.ndarray | None, bn_node: Node) -> tuple[np.ndarray, np.ndarray] | None:
        bn = _bn_params(bn_node)
        if bn is None or bn["scale"].shape != (w.shape[0],) or bn["scale"].dtype != w.dtype:
            return None
        s = bn["scale"].astype(np.float64) / np.sqrt(bn["var"].astype(np.float64) + bn["eps"])
        w2 = w.astype(np.float64) * s.reshape((-1,) + (1,) * (w.ndim - 1))
        b0 = np.zeros(w.shape[0]) if b is None else b.astype(np.float64)
        b2 = (b0 - bn["mean"].astype(np.float64)) * s + bn["bias"].astype(np.float64)
        return w2.astype(w.dtype), b2.astype(w.dtype)

    def _conv_elementwise(self, w: np.ndarray, b: np.ndarray | None, y: Value,
                          nxt: Node) -> tuple[np.ndarray, np.ndarray | None] | None:
        c = self._channel_operand(y, nxt, w.ndim, w.shape[0], w.dtype)
        if c is None:
            return None
        op, vec = c
        if op == "Mul":
            w2 = (w.astype(np.float64) * vec.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
            return w2, None if b is None else (b.astype(np.float64) * vec).astype(w.dtype)
        b0 = np.zeros(w.shape[0]) if b is None else b.astype(np.float64)
        return w, (b0 + vec).astype(w.dtype)

    @staticmethod
    def _channel_operand(y: Value, nxt: Node, rank: int | None, channels: int,
                         dtype: np.dtype) -> tuple[str, np.ndarray] | None:
        """("Mul", v) or ("Add", v): ``nxt`` applied to ``y`` as a per-channel
        multiply or add by the float64 vector ``v``."""
        if rank is None or nxt.op_type not in _ELEMENTWISE or nxt.domain != "" or len(nxt.inputs) != 2:
            return None
        a, b = nxt.inputs
        if a is y and b is not y:
            other, y_first = b, True
        elif b is y and a is not y:
            other, y_first = a, False
        else:
            return None
        c = _float_const(other)
        if c is None or c.dtype != dtype:
            return None
        vec = _per_channel(c, rank, channels)
        if vec is None:
            return None
        if nxt.op_type in ("Mul", "Add"):
            return nxt.op_type, vec
        if not y_first:
            return None  # c - y, c / y are not affine in the same form
        if nxt.op_type == "Sub":
            return "Add", -vec
        if np.any(vec == 0):
            return None
        return "Mul", 1.0 / vec

    @staticmethod
    def _set_param(ed: GraphEditor, node: Node, index: int, data: np.ndarray, suffix: str) -> None:
        old = node.inputs[index] if index < len(node.inputs) else None
        base = (old.name if old is not None else f"{node.name or node.op_type}_bias")
        base = base if base.endswith(suffix) else base + suffix
        new = ed.add_constant(base, data)
        while len(node.inputs) <= index:
            node.inputs.append(None)
        ed.graph.set_input(node, index, new)
