"""Graph analysis (constants, shapes, int8 groups), the capability check, and
lowering of a partition to a device :class:`Program`."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nnrt_core.errors import CompileError
from nnrt_core.ir import Graph, Node, TensorType, Value
from nnrt_npu_emu.cost import estimate
from nnrt_npu_emu.memory import Buffer, align, plan_offsets
from nnrt_npu_emu.numerics import STORAGE
from nnrt_npu_emu.ops import KERNELS, OPS, Step, Unsupported
from nnrt_npu_emu.ops.quant import qparams
from nnrt_npu_emu.profiles import ChipProfile
from nnrt_npu_emu.program import Instr, Operand, Program, TensorSpec

__all__ = ["Analysis", "why_unsupported", "lower_graph", "float_precision", "Lowered"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float16))
_FP16_MAX = float(np.finfo(np.float16).max)
_QTYPES = (np.dtype(np.int8), np.dtype(np.uint8))
_Q_KERNELS = frozenset({"quantize", "dequantize", "qgeneric", "qconv", "qgemm"})
_ACTS = ("Relu", "Clip")
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
        self.wdtype = STORAGE[self.precision]
        self.int8 = "int8" in profile.dtypes
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
        if self.int8:
            for n in graph.nodes:
                g = self._group(n, graph_outputs)
                if g is not None:
                    self.groups[id(n)] = g
                    for m in [n] + ([g.act] if g.act else []) + g.qs:
                        self.member[id(m)] = g

    # ------------------------------------------------------------ context
    def live(self, v: Value | None) -> bool:
        """True when ``v`` is read by a node or is a graph output."""
        return v is not None and bool(v.name) and (bool(v.uses) or id(v) in self._graph_outputs)

    def is_const(self, v: Value | None) -> bool:
        return v is not None and (v.const is not None or id(v) in self._foldable_values)

    def const(self, v: Value | None) -> np.ndarray | None:
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
    def _dq_input(self, v: Value | None) -> bool:
        p = v.producer if v is not None else None
        return p is not None and p.op_type == "DequantizeLinear"

    def _group(self, n: Node, graph_outputs: set[int]) -> QGroup | None:
        d = OPS.get(n.op_type)
        if d is None or d.int8 == "none" or id(n) in self.folded or n.op_type in _ACTS and self._acts_head(n):
            return None
        data = [v for i, v in enumerate(n.inputs) if v is not None and i not in d.const_inputs]
        if not data or not all(self._dq_input(v) or self.is_const(v) for v in data):
            return None
        if not any(self._dq_input(v) and not self.is_const(v) for v in data):
            return None
        act = None
        outs = [v for v in n.outputs if v.name]
        if len(outs) == 1 and n.op_type not in _ACTS:
            users = outs[0].consumers()
            if len(users) == 1 and users[0].op_type in _ACTS and id(outs[0]) not in graph_outputs:
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
        if p is None or p.op_type in _ACTS:
            return False
        g = self._group(p, {id(v) for v in self.graph.outputs})
        return g is not None and g.act is n


# ------------------------------------------------------------ capability
def why_unsupported(node: Node, an: Analysis) -> str | None:
    """``None`` when ``node`` can run on the chip, else the reason."""
    p = an.profile
    d = OPS.get(node.op_type)
    if node.domain not in ("", "ai.onnx"):
        return f"domain {node.domain!r} is not supported by the NPU"
    if d is None:
        return f"op {node.op_type} is not in the NPU op set"
    if not p.supports_op(node.op_type):
        return f"chip {p.name!r} does not support op {node.op_type}"
    if id(node) in an.folded:
        try:
            for v in node.outputs:
                an.const(v)
        except Unsupported as e:
            return str(e)
        return None
    if d.fold_only:
        return f"{node.op_type} is supported only as a compile-time constant"
    try:
        _check_tensors(node, an, d)
        if d.check is not None:
            r = d.check(node, an)
            if r:
                return r
        d.lower(node, an)
    except Unsupported as e:
        return str(e)
    return None


def _check_tensors(node: Node, an: Analysis, d) -> None:
    p = an.profile
    data_in = [v for i, v in enumerate(node.inputs) if v is not None and i not in d.const_inputs]
    for i in d.const_inputs:
        if i < len(node.inputs) and node.inputs[i] is not None and not an.is_const(node.inputs[i]):
            raise Unsupported(f"input {i} ({node.inputs[i].name!r}) of {node.op_type} must be a compile-time constant")
    outs = [v for v in node.outputs if an.live(v)]
    live = [v for v in data_in + outs if not an.is_const(v)]
    if live and all(an.shape(v) == () for v in live):
        # e.g. the scale products of dynamically quantized models: fp16 would flush them toward subnormals
        raise Unsupported(f"every operand of {node.op_type} is a scalar (rank 0); scalar arithmetic stays on "
                          "the host")
    for v in data_in + outs:
        shape = an.shape(v)
        if len(shape) > p.max_rank:
            raise Unsupported(f"value {v.name!r} has rank {len(shape)}; chip {p.name!r} supports rank <= {p.max_rank}")
        n = int(np.prod(shape, dtype=np.int64))
        if n == 0:
            raise Unsupported(f"value {v.name!r} is empty; the chip does not support empty tensors")
        if n * 4 > p.device_memory_bytes:
            raise Unsupported(f"value {v.name!r} ({n * 4} bytes) is larger than the device memory of "
                              f"chip {p.name!r} ({p.device_memory_bytes} bytes)")
    op = node.op_type
    if op == "QuantizeLinear":
        if not an.int8:
            raise Unsupported(f"chip {p.name!r} has no int8 support")
        if an.dtype(node.inputs[0]) not in _FLOATS:
            raise Unsupported("QuantizeLinear input must be float32/float16")
        return
    if op == "DequantizeLinear":
        if not an.is_const(node.inputs[0]) and not an.int8:
            raise Unsupported(f"chip {p.name!r} has no int8 support")
        return
    in_group = id(node) in an.member
    for v in data_in + outs:
        dt = an.dtype(v)
        if an.is_const(v) and v not in outs:
            continue
        if dt in _FLOATS:
            if an.fprec is None and not in_group:
                raise Unsupported(f"chip {p.name!r} computes only in int8 and {op} {node.name!r} is not inside a "
                                  "quantized DequantizeLinear -> op -> QuantizeLinear pattern")
            continue
        raise Unsupported(f"dtype {dt} of {v.name!r} is not supported by chip {p.name!r} "
                          f"(float32/float16{'/int8' if an.int8 else ''})")


# --------------------------------------------------------------- lowering
@dataclass
class Lowered:
    program: Program
    weights: bytes


class _Builder:
    def __init__(self, graph: Graph, an: Analysis) -> None:
        self.g, self.an = graph, an
        self.steps: list[Step] = []
        self.qsteps: set[int] = set()  # ids of steps computing in int8
        self.alias_of: dict[int, Value] = {}  # q output alias -> value holding the data

    def storage(self, v: Value) -> np.dtype:
        dt = self.an.dtype(v)
        if dt in _QTYPES or dt == np.int32 or dt == np.int64 or dt == np.bool_:
            return dt
        if dt.kind == "f":
            return STORAGE[self.an.fprec] if self.an.fprec else np.dtype(np.float32)
        raise CompileError(f"value {v.name!r} has dtype {dt}, which the chip cannot hold")

    # -- int8 groups ------------------------------------------------------
    def group_steps(self, grp: QGroup) -> list[Step]:
        an, n = self.an, grp.head
        inner = OPS[n.op_type].lower(n, an)
        if len(inner) != 1:
            raise Unsupported(f"{n.op_type} has no int8 form")
        st = inner[0]
        out_vals = [q.outputs[0] for q in grp.qs]
        # several Q nodes of one output must agree; extra ones alias the first
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
                self.alias_of[id(q.outputs[0])] = first.outputs[0]
                continue
            seen.add(id(src))
            q_of_out.append(q)
        act = None
        if grp.act is not None:
            b = OPS["Clip"].lower(grp.act, an)[0].attrs if grp.act.op_type == "Clip" else {"min": 0.0, "max": None}
            act = {"min": b.get("min", 0.0) if grp.act.op_type == "Clip" else 0.0, "max": b.get("max")}
        outq = []
        for q in q_of_out:
            s, z = qparams(q, an, len(an.shape(q.inputs[0])))
            outq += [s, z]
        outs = [q.outputs[0] for q in q_of_out]

        def dq_parts(v: Value) -> tuple[Any, np.ndarray, np.ndarray]:
            dq = v.producer
            s, z = qparams(dq, an, len(an.shape(dq.inputs[0])))
            src = dq.inputs[0]
            return (an.const(src) if an.is_const(src) else src), s, z

        if st.kernel == "alias" and len(outs) == 1:  # reshape family: pure int8 data when params agree
            x = st.ins[0]
            if self.an._dq_input(x):
                src, s, z = dq_parts(x)
                if not isinstance(src, np.ndarray) and np.array_equal(s, outq[0]) and np.array_equal(z, outq[1]) \
                        and an.dtype(src) == an.dtype(outs[0]):
                    return [Step("alias", [src], outs, {}, 0)]
            st = Step("unary", st.ins, st.outs, {"fn": "copy"}, st.macs)
        if n.op_type in ("Conv", "Gemm", "MatMul") and self._int_path(n, st):
            xq, xs, xz = dq_parts(st.ins[0])
            wq, ws, wz = dq_parts(st.ins[1])
            if n.op_type == "Conv":
                ws, wz = ws.reshape(-1), wz.reshape((-1,) + (1,) * (len(an.shape(st.ins[1])) - 1))
            bias = None
            if len(st.ins) > 2 and st.ins[2] is not None:
                bv = st.ins[2]
                if self.an._dq_input(bv) and an.dtype(bv.producer.inputs[0]) == np.int32:
                    bias = an.const(bv.producer.inputs[0]).astype(np.int32)
                else:
                    bf = an.const(bv).astype(np.float64)
                    bias = np.rint(bf / (xs.astype(np.float64).reshape(-1) * ws.astype(np.float64).reshape(-1))
                                   ).astype(np.int32)
            attrs = dict(st.attrs, act=act)
            kern = "qconv" if n.op_type == "Conv" else "qgemm"
            return [Step(kern, [xq, xs, xz, wq, ws, wz, bias] + outq, outs, attrs, st.macs)]
        ins: list[Any] = []
        qin: list[bool | None] = []
        for x in st.ins:
            if x is None:
                qin.append(None)
            elif isinstance(x, np.ndarray):
                qin.append(False)
                ins.append(x.astype(np.float32) if x.dtype.kind == "f" else x)
            elif self.an._dq_input(x):
                src, s, z = dq_parts(x)
                qin.append(True)
                ins += [src, s, z]
            else:
                qin.append(False)
                c = an.const(x)
                ins.append(c.astype(np.float32) if c.dtype.kind == "f" else c)
        return [Step("qgeneric", ins + outq, outs,
                     {"inner": st.kernel, "inner_attrs": st.attrs, "qin": qin, "act": act}, st.macs)]

    def _int_path(self, n: Node, st: Step) -> bool:
        if not all(self.an._dq_input(x) for x in st.ins[:2]):
            return False
        if n.op_type == "Gemm" and st.attrs.get("beta", 1.0) != 1.0:
            return False
        if n.op_type == "MatMul" and len(self.an.shape(st.ins[1])) != 2:
            return False
        if len(st.ins) > 2 and st.ins[2] is not None and not self.an.is_const(st.ins[2]):
            return False
        if n.op_type != "Conv" and len(st.ins) > 2 and st.ins[2] is not None \
                and len(self.an.shape(st.ins[2])) > 1 and self.an.shape(st.ins[2])[0] != 1:
            return False
        w_dq = st.ins[1].producer
        axis = int(w_dq.attr("axis", 1))
        rank = len(self.an.shape(w_dq.inputs[0]))
        s = self.an.const(w_dq.inputs[1])
        if s is not None and s.size > 1:  # per-channel weights: along output channels only
            if n.op_type == "Conv" and axis % rank != 0:
                return False
            if n.op_type != "Conv" and axis % rank != (0 if st.attrs.get("transB") else 1):
                return False
        a_dq = st.ins[0].producer
        sa = self.an.const(a_dq.inputs[1])
        return sa is not None and sa.size == 1

    # -- the whole graph ----------------------------------------------------
    def build(self) -> None:
        an = self.an
        absorbed: set[int] = set()
        for grp in an.groups.values():
            absorbed.update(id(q) for q in grp.qs)
            if grp.act is not None:
                absorbed.add(id(grp.act))
        for n in self.g.nodes:
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
                    self.qsteps.update(id(s) for s in new)
                else:
                    new = OPS[n.op_type].lower(n, an)
                    if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
                        self.qsteps.update(id(s) for s in new)
            except Unsupported as e:
                raise Unsupported(f"node {n.name!r} ({n.op_type}): {e}") from None
            self.steps.extend(new)

    def _dq_absorbed(self, n: Node) -> bool:
        v = n.outputs[0]
        if self.an.is_const(v) and not any(id(u) in self.an.member for u in v.consumers()):
            return True  # folded weights
        outs = {id(x) for x in self.g.outputs}
        return id(v) not in outs and bool(v.consumers()) and all(
            id(u) in self.an.groups and (u.op_type != "DequantizeLinear") for u in v.consumers())


def lower_graph(graph: Graph, profile: ChipProfile, precision: str) -> Lowered:
    """Lower a partition to a device program with planned memory; raises
    :class:`Unsupported` / :class:`CompileError`."""
    an = Analysis(graph, profile, precision)
    b = _Builder(graph, an)
    b.build()
    fdt = an.fprec or "fp32"

    inputs = [TensorSpec(v.name, str(an.dtype(v)), list(an.shape(v))) for v in graph.inputs]
    outputs = [TensorSpec(v.name, str(an.dtype(v)), list(an.shape(v))) for v in graph.outputs]
    loc: dict[int, Operand] = {}
    instrs: list[Instr] = []
    consts: list[tuple[np.ndarray, int]] = []
    const_size = 0
    const_ids: dict[int, Operand] = {}
    ws_vals: dict[int, tuple[Value, int]] = {}  # value id -> (value, def index)
    root: dict[int, int] = {}  # alias value id -> root value id
    last: dict[int, int] = {}

    def add_const(arr: np.ndarray, keep: bool) -> Operand:
        nonlocal const_size
        key = id(arr)
        if key in const_ids:
            return const_ids[key]
        a = np.asarray(arr)
        if a.dtype.kind == "f":
            dt = np.dtype(np.float32) if keep else STORAGE[fdt]
            if dt == np.float16 and a.dtype != np.float16:  # saturate like the chip's stores (e.g. -3.4e38 masks)
                a = np.clip(a, -_FP16_MAX, _FP16_MAX)
            a = a.astype(dt)
        elif a.dtype == np.int64:
            if a.size and (a.min() < -2 ** 31 or a.max() >= 2 ** 31):
                raise CompileError("an int64 constant does not fit the chip's int32")
            a = a.astype(np.int32)
        elif a.dtype == np.bool_:
            a = a.astype(np.uint8)
        a = np.ascontiguousarray(a)
        op = Operand("const", const_size, str(a.dtype), list(a.shape))
        consts.append((a, const_size))
        const_size += align(a.nbytes)
        const_ids[key] = op
        return op

    def new_ws(v: Value, idx: int, dtype: np.dtype | None = None) -> Operand:
        dt = dtype if dtype is not None else b.storage(v)
        op = Operand("ws", -1, str(np.dtype(dt)), list(an.shape(v)))
        loc[id(v)] = op
        ws_vals[id(v)] = (v, idx)
        root[id(v)] = id(v)
        return op

    def use(v: Value, idx: int, keep: bool) -> Operand:
        if id(v) in b.alias_of:
            v = b.alias_of[id(v)]
        if id(v) in loc:
            r = root.get(id(v))
            if r is not None:
                last[r] = max(last.get(r, -1), idx)
            return loc[id(v)]
        if an.is_const(v):
            c = an.const(v)
            if v.const is not None or id(v) not in const_ids:
                op = add_const(c, keep)
                loc[id(v)] = op
                return op
        raise CompileError(f"value {v.name!r} is read before it is produced")

    for i, v in enumerate(graph.inputs):
        st = b.storage(v)
        op_in = Operand("in", i, str(an.dtype(v)), list(an.shape(v)))
        if np.dtype(st) != an.dtype(v):
            k = len(instrs)
            dst = new_ws(v, k, st)
            instrs.append(Instr("cast", f"input:{v.name}", [op_in], [dst], {}, 0, fdt))
        else:
            loc[id(v)] = op_in

    for st in b.steps:
        k = len(instrs)
        keep = id(st) in b.qsteps
        if st.kernel == "alias":
            x = st.ins[0]
            src = add_const(x, keep) if isinstance(x, np.ndarray) else use(x, k, keep)
            out = st.outs[0]
            loc[id(out)] = Operand(src.space, src.offset, src.dtype, list(an.shape(out)))
            if src.space == "ws":
                root[id(out)] = root[id(x)] if not isinstance(x, np.ndarray) and id(x) in root else id(out)
            continue
        ins = []
        for x in st.ins:
            if x is None:
                ins.append(None)
            elif isinstance(x, np.ndarray):
                ins.append(add_const(x, keep))
            else:
                ins.append(use(x, k, keep))
        outs = [new_ws(o, k) for o in st.outs]
        dtype = "int8" if keep and st.kernel != "dequantize" or st.kernel == "quantize" else fdt
        instrs.append(Instr(st.kernel, ",".join(o.name for o in st.outs)[:200], ins, outs, st.attrs, st.macs, dtype))

    for j, v in enumerate(graph.outputs):
        k = len(instrs)
        src = use(v, k, False)
        dst = Operand("out", j, outputs[j].dtype, outputs[j].shape)
        instrs.append(Instr("cast", f"output:{v.name}", [src], [dst], {}, 0, fdt))

    # lifetime-based workspace planning (aliases share their root's buffer)
    bufs: dict[int, Buffer] = {}
    for vid, (v, idx) in ws_vals.items():
        if root.get(vid) != vid:
            continue
        bufs[vid] = Buffer(len(bufs), loc[vid].nbytes, idx, max(last.get(vid, idx), idx))
    ws_size = plan_offsets(list(bufs.values()))
    for vid, op in list(loc.items()):
        if op.space == "ws":
            r = root.get(vid, vid)
            base = bufs[r].offset
            op.offset = base
    for ins in instrs:
        estimate(ins, profile)
    weights = bytearray(const_size)
    for a, off in consts:
        weights[off:off + a.nbytes] = a.tobytes()
    prog = Program(profile.chip_id, fdt if not an.groups else f"{fdt}+int8", inputs, outputs, instrs,
                   ws_size, const_size)
    need = ws_size + const_size + sum(align(Operand("in", 0, t.dtype, t.shape).nbytes) for t in inputs + outputs)
    if need > profile.device_memory_bytes:
        raise CompileError(
            f"partition {graph.name!r} needs {need} bytes of device memory (weights {const_size}, workspace "
            f"{ws_size}, I/O) but chip {profile.name!r} has {profile.device_memory_bytes}")
    prog.validate()
    return Lowered(prog, bytes(weights))
