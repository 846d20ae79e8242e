"""Exact clean-up of QuantizeLinear / DequantizeLinear chains.

Quantized graphs (TFLite int8 imports, QDQ ONNX models) carry activations as
float between a ``DequantizeLinear`` (DQ) and a ``QuantizeLinear`` (Q).  Three
rewrites remove work without changing a single output bit; each needs
per-tensor parameters (one scale, one zero point, both constants) that are
the same on both sides:

* ``Q(DQ(q))`` is ``q``: the pair is removed;
* ``Q(M(DQ(q)))``, ``M`` an op that only moves or selects elements
  (Reshape, Transpose, Slice, Squeeze, Unsqueeze, Flatten, Gather, Identity,
  DepthToSpace, SpaceToDepth, Concat of DQs with those parameters), is ``M``
  on the integers: one node instead of three;
* ``Q(Relu(x))`` / ``Q(Clip(x, lo, hi))`` is ``Q(x)`` when the quantizer
  already clamps there (a zero point at the type's minimum for Relu, ``lo``
  and ``hi`` beyond the rounding range for Clip): the activation goes.

The integer ``M`` is made only where every selected backend that runs the
``DQ -> M -> Q`` chain (probed as one sub-graph) runs it too
(``PassContext.backend_supports_chain``), so a partition does not split on
it: an int8 NPU that runs ``M`` only inside its quantized groups keeps the
float form.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nnrt_core.ir import Graph, Node, Value
from nnrt_core.ir.dtypes import DataType
from nnrt_core.passes.base import Pass, PassContext, PassResult
from nnrt_core.passes.rewrite import GraphEditor, clip_bounds, is_constant

__all__ = ["QdqCleanup", "MOVEMENT_OPS"]

#: integer types a Q/DQ pair round-trips exactly, with their ranges
_RANGES = {DataType.INT8: (-128, 127), DataType.UINT8: (0, 255), DataType.INT16: (-32768, 32767),
           DataType.UINT16: (0, 65535)}
#: ops whose output elements are input elements (input 0 is the data; others index or shape it)
MOVEMENT_OPS = frozenset({"Reshape", "Transpose", "Slice", "Squeeze", "Unsqueeze", "Flatten", "Gather",
                          "Identity", "DepthToSpace", "SpaceToDepth"})
#: how far inside a rounding boundary (in quantization steps) a Clip bound must be to be dropped
_MARGIN = 0.01


class QParams(NamedTuple):
    scale: float
    zero_point: int
    dtype: DataType


def qparams(node: Node) -> QParams | None:
    """The per-tensor parameters of a Q / DQ node: scalar constant scale and zero point."""
    if node.domain != "" or len(node.inputs) < 3 or node.attr("block_size", 0):
        return None
    scale, zp = node.inputs[1], node.inputs[2]
    if not (is_constant(scale) and is_constant(zp)) or scale.const.size != 1 or zp.const.size != 1:  # type: ignore[union-attr]
        return None
    dtype = zp.dtype  # type: ignore[union-attr]
    s = float(scale.const.reshape(()))  # type: ignore[union-attr]
    if dtype not in _RANGES or scale.dtype != DataType.FLOAT or not (np.isfinite(s) and s > 0):  # type: ignore[union-attr]
        return None
    return QParams(s, int(zp.const.reshape(())), dtype)  # type: ignore[union-attr]


def _node_is(v: Value | None, op: str, graph: Graph) -> Node | None:
    p = v.producer if v is not None else None
    return p if p is not None and p.graph is graph and p.op_type == op and p.domain == "" else None


class QdqCleanup(Pass):
    """Remove Q/DQ round trips, move data-movement ops to the integers and
    drop activations the quantizer already applies (exact; module docstring)."""

    name = "qdq_cleanup"
    level = "basic"
    description = "remove Q(DQ(q)) round trips, run Reshape/Slice/Concat/... on the integers, drop clamps Q applies"
    requires_ops = (frozenset({"QuantizeLinear"}),)

    def run(self, graph: Graph, ctx: PassContext | None = None) -> PassResult:
        ctx = ctx or PassContext()
        res = self.result()
        ed = GraphEditor(graph)
        for q in list(graph.nodes):
            if q.graph is not graph or q.op_type != "QuantizeLinear" or not ctx.may_rewrite(q):
                continue
            p = qparams(q)
            if p is None or q.inputs[0] is None:
                continue
            self._drop_clamp(ed, ctx, q, p, res)
            if not self._round_trip(ed, ctx, q, p, res):
                self._movement(ed, ctx, q, p, res)
        return res

    # -- Q(Relu(x)), Q(Clip(x)) ------------------------------------------------
    def _drop_clamp(self, ed: GraphEditor, ctx: PassContext, q: Node, p: QParams, res: PassResult) -> None:
        act = q.inputs[0].producer  # type: ignore[union-attr]
        if (act is None or act.graph is not ed.graph or act.domain != "" or act.op_type not in ("Relu", "Clip")
                or ed.sole_reader(q.inputs[0]) is not q or not ctx.may_rewrite(act)):  # type: ignore[arg-type]
            return
        bounds = _clamp_bounds(act)
        if bounds is None or not _clamp_is_free(bounds, p):
            return
        src = act.inputs[0]
        if src is None:
            return
        ed.graph.set_input(q, 0, src)
        ed.detach(act)
        res.record(f"dropped {act.op_type} {act.name!r}: {q.name!r} clamps there already", removed=1)

    # -- Q(DQ(q)) -------------------------------------------------------------
    def _round_trip(self, ed: GraphEditor, ctx: PassContext, q: Node, p: QParams, res: PassResult) -> bool:
        dq = _node_is(q.inputs[0], "DequantizeLinear", ed.graph)
        src = dq.inputs[0] if dq is not None else None
        if dq is None or src is None or qparams(dq) != p or src.dtype != p.dtype or not ctx.may_rewrite(dq):
            return False
        out = q.outputs[0]
        if not ed.is_output(out):
            ed.replace_uses(out, src)
            ed.detach(q)
        else:  # the output keeps its name: src's producer writes it, when src is read by this pair alone
            producer = src.producer
            if (producer is None or producer.graph is not ed.graph or ed.sole_reader(src) is not dq
                    or ed.sole_reader(dq.outputs[0]) is not q):
                return False
            ed.detach(q)
            ed.detach(dq)
            ed.adopt_output(producer, src.output_index, out)
        res.record(f"removed the round trip {dq.name!r} -> {q.name!r}", removed=1)
        return True

    # -- Q(M(DQ(q))) ----------------------------------------------------------
    def _movement(self, ed: GraphEditor, ctx: PassContext, q: Node, p: QParams, res: PassResult) -> None:
        mid = q.inputs[0].producer  # type: ignore[union-attr]
        if (mid is None or mid.graph is not ed.graph or mid.domain != "" or len(mid.outputs) != 1
                or ed.sole_reader(q.inputs[0]) is not q or not ctx.may_rewrite(mid)):  # type: ignore[arg-type]
            return
        if mid.op_type in MOVEMENT_OPS:
            data = [0]
        elif mid.op_type == "Concat":
            data = list(range(len(mid.inputs)))
        else:
            return
        dqs = [_node_is(mid.inputs[i], "DequantizeLinear", ed.graph) for i in data]
        if any(d is None or qparams(d) != p or d.inputs[0] is None or d.inputs[0].dtype != p.dtype
               for d in dqs):
            return
        inputs = list(mid.inputs)
        for i, d in zip(data, dqs):
            inputs[i] = d.inputs[0]  # type: ignore[union-attr]
        out = q.outputs[0]
        moved = Node(mid.op_type, inputs, [out], name=ed.fresh_name(f"{mid.name or mid.op_type}_int"),
                     opset=mid.opset, attributes=mid.attributes.values())
        # the chain is probed as one graph: a backend running quantized groups (an int8 NPU) may run the float
        # ``mid`` only inside its group, and must then run the integer op too
        if not ctx.backend_supports_chain(moved, [*dqs, mid, q]):  # type: ignore[list-item]
            return
        index = ed.graph.nodes.index(q)
        ed.detach(q)
        ed.detach(mid)
        ed.graph.add_node(moved, index=index - 1)  # mid came before q: q's slot is one lower now
        res.record(f"{mid.op_type} {mid.name!r} runs on the integers of {q.name!r}", removed=2, added=1)


def _clamp_bounds(act: Node) -> tuple[float, float] | None:
    """(lo, hi) of a Relu or a Clip with constant (or absent) bounds."""
    return (0.0, np.inf) if act.op_type == "Relu" else clip_bounds(act)


def _clamp_is_free(bounds: tuple[float, float], p: QParams) -> bool:
    """Whether Q clamps at least as hard as the bounds: every value below ``lo``
    and ``lo`` itself quantize to the type's minimum, every value above ``hi``
    and ``hi`` itself to its maximum (with a margin against rounding)."""
    lo, hi = bounds
    qmin, qmax = _RANGES[p.dtype]
    lo_free = lo == -np.inf or lo / p.scale + p.zero_point <= qmin + 0.5 - _MARGIN
    hi_free = hi == np.inf or hi / p.scale + p.zero_point >= qmax - 0.5 + _MARGIN
    return lo <= hi and lo_free and hi_free
