"""Lowering stage 1, analysis: graph facts for one chip (dtypes, static shapes,
compile-time constants and folding, the DQ -> op -> Q groups run in int8)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nnrt_core.ir import Graph, Node, TensorType, Value
from nnrt_core.ir.shape_values import shape_value_producers
from nnrt_npu_emu.numerics import STORAGE
from nnrt_npu_emu.ops import KERNELS, OPS, Unsupported
from nnrt_npu_emu.profiles import ChipProfile

__all__ = ["Analysis", "QGroup", "float_precision", "dynamic_quant_upstream", "FLOAT_DTYPES", "QUANT_DTYPES",
           "FUSED_ACTIVATIONS"]

#: float element types the chip computes in
FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float16))
#: quantized element types of int8 groups
QUANT_DTYPES = (np.dtype(np.int8), np.dtype(np.uint8))
#: activations fused into the int8 group of their producer
FUSED_ACTIVATIONS = ("Relu", "Clip")
_SAME_SHAPE = frozenset({"Identity", "Dropout", "Relu", "Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish",
                         "LeakyRelu", "Elu", "Gelu", "Abs", "Neg", "Sqrt", "Exp", "Log", "Reciprocal", "Erf",
                         "Softplus", "Floor", "Ceil", "Softmax", "LogSoftmax", "BatchNormalization",
                         "LayerNormalization", "PRelu"})


def float_precision(profile: ChipProfile, requested: str) -> str | None:
    """The float compute type on ``profile`` for a config asking ``requested``."""
    if requested == "fp32" and "fp32" in profile.dtypes:
        return "fp32"
    if "fp16" in profile.dtypes:
        return "fp16"
    if "fp32" in profile.dtypes:
        return "fp32"
    return None


def dynamic_quant_upstream(graph: Graph) -> dict[int, str]:
    """``id`` of every node on a path into a ``DynamicQuantizeLinear`` -> the
    name of the first such quantizer found.  Dynamic quantization takes its
    scale and zero point from the data at run time, so fp16 rounding anywhere
    upstream moves values across int8 steps, which the integer matrix
    products after it amplify (T5's encoder: 0.42 relative error with every
    overflowing partition off the chip, 0.32 with the quantizers' direct
    producers off too, 4e-8 with all of this set off; docs/scheduling.md)."""
    out: dict[int, str] = {}
    for q in graph.nodes:
        if q.op_type != "DynamicQuantizeLinear" or q.domain not in ("", "ai.onnx"):
            continue
        stack = [v.producer for v in q.inputs if v is not None and v.producer is not None]
        while stack:
            n = stack.pop()
            if id(n) in out:
                continue
            out[id(n)] = q.name
            stack.extend(v.producer for v in n.inputs if v is not None and v.producer is not None)
    return out


@dataclass
class QGroup:
    """A folded DQ -> op [-> Relu/Clip] -> Q pattern run in int8."""

    head: Node
    act: Node | None
    qs: list[Node]  #: the Q node(s) of each output
    out_qs: list[list[Node]] = field(default_factory=list)


class Analysis:
    """Facts about one graph for one chip (the :class:`LowerContext` of ops)."""

    def __init__(self, graph: Graph, profile: ChipProfile, precision: str) -> None:
        self.graph = graph
        self.profile = profile
        self.fprec = float_precision(profile, precision)
        self.precision = self.fprec or "fp32"
        #: ``precision="fp32"`` asked of a chip without fp32: only nodes that compute bit-exactly what
        #: fp32 would run on it (``capability.exact_in_fp32``); the rest are declined, never rounded
        self.exact_only = precision == "fp32" and "fp32" not in profile.dtypes
        self.wdtype = STORAGE[self.precision]
        self.int8 = "int8" in profile.dtypes
        #: nodes feeding a dynamic quantizer (:func:`dynamic_quant_upstream`): kept off fp16 compute
        self.dynamic_quant_inputs = dynamic_quant_upstream(graph) if self.precision == "fp16" else {}
        #: nodes computing a value that becomes a shape (``nnrt_core.ir.shape_values``): kept off fp16 compute
        self.shape_values = shape_value_producers(graph) if self.precision == "fp16" else {}
        self._consts: dict[int, np.ndarray] = {}
        self.folded: set[int] = set()  # ids of nodes evaluated at compile time
        self._foldable_values: set[int] = set()
        graph_outputs = {id(v) for v in graph.outputs}
        self._graph_outputs = graph_outputs
        for n in graph.nodes:
            if self._foldable(n):
                self.folded.add(id(n))
                self._foldable_values.update(id(v) for v in n.outputs)
        self.groups: dict[int, QGroup] = {}
        self.member: dict[int, QGroup] = {}
        if self.int8 and not self.exact_only:  # an int8 group is a reduced precision: not under fp32
            for n in graph.nodes:
                g = self._group(n, graph_outputs)
                if g is not None:
                    self.groups[id(n)] = g
                    for m in [n] + ([g.act] if g.act else []) + g.qs:
                        self.member[id(m)] = g

    # ------------------------------------------------------------ context
    @property
    def graph_output_ids(self) -> set[int]:
        """``id`` of every graph output value."""
        return self._graph_outputs

    def live(self, v: Value | None) -> bool:
        """True when ``v`` is read by a node or is a graph output."""
        return v is not None and bool(v.name) and (bool(v.uses) or id(v) in self._graph_outputs)

    def is_const(self, v: Value | None) -> bool:
        """True when ``v`` is an initializer or the output of a folded node."""
        return v is not None and (v.const is not None or id(v) in self._foldable_values)

    def const(self, v: Value | None) -> np.ndarray | None:
        """The compile-time value of ``v`` (folding on demand); ``None`` when not constant."""
        if v is None:
            return None
        if v.const is not None:
            return v.const
        if id(v) not in self._foldable_values:
            return None
        if id(v) not in self._consts:
            self._fold(v.producer)
        return self._consts[id(v)]

    def shape(self, v: Value) -> tuple[int, ...]:
        """The static shape of ``v``; raises :class:`Unsupported` when dynamic or unknown."""
        if v.const is not None:
            return tuple(v.const.shape)
        t = v.type
        if (not isinstance(t, TensorType) or not t.is_static) and self._same_shape(v):
            return self.shape(v.producer.inputs[0])
        if not isinstance(t, TensorType) or not t.is_static:
            raise Unsupported(f"value {v.name!r} has a dynamic or unknown shape ({t}); the chip needs static shapes")
        return tuple(int(d) for d in t.shape)

    def _same_shape(self, v: Value) -> bool:
        """Output 0 of an op whose shape and type equal its input's (shape inference gaps)."""
        p = v.producer
        return (p is not None and v.output_index == 0 and p.op_type in _SAME_SHAPE and bool(p.inputs)
                and p.inputs[0] is not None)

    def dtype(self, v: Value) -> np.dtype:
        """The element type of ``v``; raises :class:`Unsupported` when unknown."""
        if v.const is not None:
            return v.const.dtype
        t = v.type
        if (not isinstance(t, TensorType) or t.dtype == 0) and self._same_shape(v):
            return self.dtype(v.producer.inputs[0])
        try:
            return v.type.dtype.numpy
        except (AttributeError, TypeError):
            raise Unsupported(f"value {v.name!r} has an unknown element type") from None

    # ---------------------------------------------------------- folding
    def _foldable(self, n: Node) -> bool:
        d = OPS.get(n.op_type)
        if d is None or n.domain not in ("", "ai.onnx") or n.subgraphs():
            return False
        if n.op_type in ("Shape", "Size"):
            try:
                self.shape(n.inputs[0])
                return True
            except Unsupported:
                return False
        if n.op_type in ("QuantizeLinear",):
            return False
        return all(self.is_const(v) for v in n.inputs if v is not None)

    def _fold(self, n: Node) -> None:
        try:
            steps = OPS[n.op_type].lower(n, self)
            env: dict[int, np.ndarray] = {}
            for st in steps:
                args = []
                for x in st.ins:
                    if x is None or isinstance(x, np.ndarray):
                        args.append(x)
                    else:
                        args.append(env[id(x)] if id(x) in env else self.const(x))
                if st.kernel == "alias":
                    env[id(st.outs[0])] = np.asarray(args[0]).reshape(self.shape(st.outs[0]))
                    continue
                outs = [np.empty(self.shape(o), self.dtype(o)) for o in st.outs]
                KERNELS[st.kernel](args, outs, st.attrs)
                for o, a in zip(st.outs, outs):
                    env[id(o)] = a
        except Unsupported:
            raise
        except Exception as e:
            raise Unsupported(f"constant folding of {n.name!r} ({n.op_type}) failed: {type(e).__name__}: {e}") from e
        for v in n.outputs:
            if v.name:
                self._consts[id(v)] = env[id(v)]

    # ------------------------------------------------------------- int8
    def is_dequantized(self, v: Value | None) -> bool:
        """True when ``v`` is the output of a DequantizeLinear node."""
        p = v.producer if v is not None else None
        return p is not None and p.op_type == "DequantizeLinear"

    def _group(self, n: Node, graph_outputs: set[int]) -> QGroup | None:
        d = OPS.get(n.op_type)
        if d is None or d.int8 == "none" or id(n) in self.folded or n.op_type in FUSED_ACTIVATIONS and self._acts_head(n):
            return None
        data = [v for i, v in enumerate(n.inputs) if v is not None and i not in d.const_inputs]
        if not data or not all(self.is_dequantized(v) or self.is_const(v) for v in data):
            return None
        if not any(self.is_dequantized(v) and not self.is_const(v) for v in data):
            return None
        act = None
        outs = [v for v in n.outputs if v.name]
        if len(outs) == 1 and n.op_type not in FUSED_ACTIVATIONS:
            users = outs[0].consumers()
            if len(users) == 1 and users[0].op_type in FUSED_ACTIVATIONS and id(outs[0]) not in graph_outputs:
                act = users[0]
                outs = [act.outputs[0]]
        qs: list[Node] = []
        for o in outs:
            users = o.consumers()
            if not users or id(o) in graph_outputs or not all(u.op_type == "QuantizeLinear" for u in users):
                return None
            qs.extend(users)
        return QGroup(n, act, qs)

    def _acts_head(self, n: Node) -> bool:
        """True when activation ``n`` is fused into the group of its producer."""
        p = n.inputs[0].producer if n.inputs and n.inputs[0] is not None else None
        if p is None or p.op_type in FUSED_ACTIVATIONS:
            return False
        g = self._group(p, {id(v) for v in self.graph.outputs})
        return g is not None and g.act is n
