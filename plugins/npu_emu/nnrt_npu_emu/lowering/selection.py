"""Lowering stage 3, selection: the device steps of a graph in execution order,
with each DQ -> op [-> act] -> Q group folded into one int8 step."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nnrt_core.ir import Graph, Node, Value
from nnrt_npu_emu.lowering.analysis import Analysis, QGroup
from nnrt_npu_emu.lowering.capability import why_unsupported
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
        """The int8 step(s) of one group: a pure alias, an integer conv/gemm or a generic requantizing step."""
        an, n = self.an, grp.head
        inner = OPS[n.op_type].lower(n, an)
        if len(inner) != 1:
            raise Unsupported(f"{n.op_type} has no int8 form")
        st = inner[0]
        q_of_out = self._distinct_qs(grp)
        act = self._act_bounds(grp)
        outq: list[np.ndarray] = []
        for q in q_of_out:
            s, z = qparams(q, an, len(an.shape(q.inputs[0])))
            outq += [s, z]
        outs = [q.outputs[0] for q in q_of_out]
        if st.kernel == "alias" and len(outs) == 1:  # reshape family: pure int8 data when params agree
            alias = self._alias_step(st, outq, outs)
            if alias is not None:
                return [alias]
            st = Step("unary", st.ins, st.outs, {"fn": "copy"}, st.macs)
        if n.op_type in ("Conv", "Gemm", "MatMul") and self._int_path(n, st):
            return [self._int_step(n, st, outq, outs, act)]
        return [self._generic_step(st, outq, outs, act)]

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

    def _act_bounds(self, grp: QGroup) -> dict[str, Any] | None:
        """The fused activation's clamp (``min``/``max``), or ``None`` without one."""
        if grp.act is None:
            return None
        is_clip = grp.act.op_type == "Clip"
        b = OPS["Clip"].lower(grp.act, self.an)[0].attrs if is_clip else {"min": 0.0, "max": None}
        return {"min": b.get("min", 0.0) if is_clip else 0.0, "max": b.get("max")}

    def _dq_parts(self, v: Value) -> tuple[Any, np.ndarray, np.ndarray]:
        """(quantized source value or constant, scale, zero point) of a dequantized value."""
        an = self.an
        dq = v.producer
        s, z = qparams(dq, an, len(an.shape(dq.inputs[0])))
        src = dq.inputs[0]
        return (an.const(src) if an.is_const(src) else src), s, z

    def _alias_step(self, st: Step, outq: list[np.ndarray], outs: list[Value]) -> Step | None:
        """A reshape of int8 data when input and output quantization agree, else ``None``."""
        x = st.ins[0]
        if not self.an.is_dequantized(x):
            return None
        src, s, z = self._dq_parts(x)
        if not isinstance(src, np.ndarray) and np.array_equal(s, outq[0]) and np.array_equal(z, outq[1]) \
                and self.an.dtype(src) == self.an.dtype(outs[0]):
            return Step("alias", [src], outs, {}, 0)
        return None

    def _int_step(self, n: Node, st: Step, outq: list[np.ndarray], outs: list[Value],
                  act: dict[str, Any] | None) -> Step:
        """An integer-accumulating ``qconv``/``qgemm`` step (int32 bias)."""
        an = self.an
        xq, xs, xz = self._dq_parts(st.ins[0])
        wq, ws, wz = self._dq_parts(st.ins[1])
        if n.op_type == "Conv":
            ws, wz = ws.reshape(-1), wz.reshape((-1,) + (1,) * (len(an.shape(st.ins[1])) - 1))
        bias = None
        if len(st.ins) > 2 and st.ins[2] is not None:
            bv = st.ins[2]
            if an.is_dequantized(bv) and an.dtype(bv.producer.inputs[0]) == np.int32:
                bias = an.const(bv.producer.inputs[0]).astype(np.int32)
            else:
                bf = an.const(bv).astype(np.float64)
                bias = np.rint(bf / (xs.astype(np.float64).reshape(-1) * ws.astype(np.float64).reshape(-1))
                               ).astype(np.int32)
        attrs = dict(st.attrs, act=act)
        kern = "qconv" if n.op_type == "Conv" else "qgemm"
        return Step(kern, [xq, xs, xz, wq, ws, wz, bias] + outq, outs, attrs, st.macs)

    def _generic_step(self, st: Step, outq: list[np.ndarray], outs: list[Value],
                      act: dict[str, Any] | None) -> Step:
        """A ``qgeneric`` step: dequantize the int8 inputs, run ``st``'s kernel in fp32, requantize."""
        an = self.an
        ins: list[Any] = []
        qin: list[bool | None] = []
        for x in st.ins:
            if x is None:
                qin.append(None)
            elif isinstance(x, np.ndarray):
                qin.append(False)
                ins.append(x.astype(np.float32) if x.dtype.kind == "f" else x)
            elif an.is_dequantized(x):
                src, s, z = self._dq_parts(x)
                qin.append(True)
                ins += [src, s, z]
            else:
                qin.append(False)
                c = an.const(x)
                ins.append(c.astype(np.float32) if c.dtype.kind == "f" else c)
        return Step("qgeneric", ins + outq, outs,
                    {"inner": st.kernel, "inner_attrs": st.attrs, "qin": qin, "act": act}, st.macs)

    def _int_path(self, n: Node, st: Step) -> bool:
        """True when a Conv/Gemm/MatMul group can accumulate in int32 (per-tensor
        activations, weights per tensor or per output channel, constant bias)."""
        an = self.an
        if not all(an.is_dequantized(x) for x in st.ins[:2]):
            return False
        if n.op_type == "Gemm" and st.attrs.get("beta", 1.0) != 1.0:
            return False
        if n.op_type == "MatMul" and len(an.shape(st.ins[1])) != 2:
            return False
        if len(st.ins) > 2 and st.ins[2] is not None and not an.is_const(st.ins[2]):
            return False
        if n.op_type != "Conv" and len(st.ins) > 2 and st.ins[2] is not None \
                and len(an.shape(st.ins[2])) > 1 and an.shape(st.ins[2])[0] != 1:
            return False
        w_dq = st.ins[1].producer
        axis = int(w_dq.attr("axis", 1))
        rank = len(an.shape(w_dq.inputs[0]))
        s = an.const(w_dq.inputs[1])
        if s is not None and s.size > 1:  # per-channel weights: along output channels only
            if n.op_type == "Conv" and axis % rank != 0:
                return False
            if n.op_type != "Conv" and axis % rank != (0 if st.attrs.get("transB") else 1):
                return False
        a_dq = st.ins[0].producer
        sa = an.const(a_dq.inputs[1])
        return sa is not None and sa.size == 1
