"""Lowering stage 3, selection: the device steps of a graph in execution order,
with each DQ -> op [-> act] -> Q group folded into one int8 step."""
from __future__ import annotations

from dataclasses import dataclass, field
import numpy as np

from nnrt_core.ir import Graph, Node, Value
from nnrt_npu_emu.lowering.analysis import Analysis, QGroup
from nnrt_npu_emu.lowering.capability import why_unsupported
from nnrt_npu_emu.lowering.int8_steps import Int8StepBuilder
from nnrt_npu_emu.ops import OPS, Step, Unsupported
from nnrt_npu_emu.ops.quant import qparams

__all__ = ["Selection", "StepSelector", "select_steps"]


@dataclass
class Selection:
    """The chosen steps of one graph, ready for emission."""

    steps: list[Step] = field(default_factory=list)
    int8_steps: set[int] = field(default_factory=set)  #: ids of steps computing in int8
    alias_of: dict[int, Value] = field(default_factory=dict)  #: duplicate Q output id -> value holding the data


def select_steps(graph: Graph, an: Analysis) -> Selection:
    """The steps lowering ``graph``; raises :class:`Unsupported` naming the first node the chip cannot run."""
    return StepSelector(graph, an).select()


class StepSelector:
    """Chooses the steps of each node (or int8 group) of one analysed graph."""

    def __init__(self, graph: Graph, an: Analysis) -> None:
        self.graph, self.an = graph, an
        self.int8 = Int8StepBuilder(an)
        self.result = Selection()

    # -- the whole graph ----------------------------------------------------
    def select(self) -> Selection:
        """Steps for every node that is neither folded nor absorbed into an int8 group."""
        an, sel = self.an, self.result
        absorbed: set[int] = set()
        for grp in an.groups.values():
            absorbed.update(id(q) for q in grp.qs)
            if grp.act is not None:
                absorbed.add(id(grp.act))
        for n in self.graph.nodes:
            if id(n) in an.folded or id(n) in absorbed:
                continue
            if n.op_type == "DequantizeLinear" and self._dq_absorbed(n):
                continue
            r = why_unsupported(n, an) if id(n) not in an.groups else None
            if r is not None:
                raise Unsupported(f"node {n.name!r} ({n.op_type}): {r}")
            try:
                if id(n) in an.groups:
                    new = self.group_steps(an.groups[id(n)])
                    sel.int8_steps.update(id(s) for s in new)
                else:
                    new = OPS[n.op_type].lower(n, an)
                    if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
                        sel.int8_steps.update(id(s) for s in new)
            except Unsupported as e:
                raise Unsupported(f"node {n.name!r} ({n.op_type}): {e}") from None
            sel.steps.extend(new)
        return sel

    def _dq_absorbed(self, n: Node) -> bool:
        v = n.outputs[0]
        if self.an.is_const(v) and not any(id(u) in self.an.member for u in v.consumers()):
            return True  # folded weights
        outs = {id(x) for x in self.graph.outputs}
        return id(v) not in outs and bool(v.consumers()) and all(
            id(u) in self.an.groups and (u.op_type != "DequantizeLinear") for u in v.consumers())

    # -- int8 groups ------------------------------------------------------
    def group_steps(self, grp: QGroup) -> list[Step]:
        """The int8 step of one group (see :class:`Int8StepBuilder`)."""
        n = grp.head
        inner = OPS[n.op_type].lower(n, self.an)
        if len(inner) != 1:
            raise Unsupported(f"{n.op_type} has no int8 form")
        outs = [self.int8.out_quant(q) for q in self._distinct_qs(grp)]
        return [self.int8.step(grp, inner[0], outs)]

    def _distinct_qs(self, grp: QGroup) -> list[Node]:
        """The first Q node of each output; several Q nodes of one output must
        agree, and the extra ones alias the first."""
        an = self.an
        q_of_out: list[Node] = []
        seen: set[int] = set()
        for q in grp.qs:
            src = q.inputs[0]
            if id(src) in seen:
                first = next(x for x in q_of_out if x.inputs[0] is src)
                s1, z1 = qparams(first, an, len(an.shape(src)))
                s2, z2 = qparams(q, an, len(an.shape(src)))
                if not (np.array_equal(s1, s2) and np.array_equal(z1, z2)
                        and an.dtype(first.outputs[0]) == an.dtype(q.outputs[0])):
                    raise Unsupported("one output feeds QuantizeLinear nodes with different parameters")
                self.result.alias_of[id(q.outputs[0])] = first.outputs[0]
                continue
            seen.add(id(src))
            q_of_out.append(q)
        return q_of_out
