"""Which tensors to quantize, their int8 parameters, and the QDQ rewrite.

The output is the standard ONNX "QDQ" form that ONNX Runtime's quantizer
writes and int8 accelerators fold:

* every float activation read or written by a quantized node goes through
  ``QuantizeLinear -> DequantizeLinear`` (per tensor);
* Conv / Gemm / MatMul weights become int8 initializers (symmetric, per output
  channel) behind a ``DequantizeLinear``; their biases int32 with scale
  ``x_scale * w_scale`` (per channel), zero point 0;
* an op followed by its only consumer ``Relu`` / ``Clip`` keeps the tensor
  between them in float, so ``DQ -> op -> Relu -> Q`` is one int8 group
  (the NPU's fused activation);
* data-movement ops (MaxPool, Reshape, Flatten, Transpose...) reuse their
  input's parameters for their output, so they need no requantization.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nnrt_core.ir import Attribute, AttrKind, DataType, Graph, Node, TensorType, Value
from nnrt_core.quantization.config import QuantizationConfig

__all__ = ["QuantPlan", "QParams", "plan_quantization", "activation_qparams", "apply_plan",
           "WEIGHT_OPS", "PASSTHROUGH_OPS", "FUSED_ACTIVATIONS", "FIXED_RANGES"]

#: ops whose constant weight (input 1) is quantized per channel, and whose bias (input 2) to int32
WEIGHT_OPS = frozenset({"Conv", "Gemm", "MatMul"})
#: ops whose output values are a subset of their input's: the output shares the input's parameters
PASSTHROUGH_OPS = frozenset({"MaxPool", "GlobalMaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze",
                             "Identity", "Dropout", "Slice", "Split", "Gather", "Expand", "Tile", "DepthToSpace",
                             "SpaceToDepth"})
#: outputs with a range fixed by the op, not calibrated (ONNX Runtime fuses DQ -> Softmax -> Q into
#: QLinearSoftmax, which assumes the output spans [0, 1]; its own quantizer forces this range too)
FIXED_RANGES = {"Softmax": (0.0, 1.0)}
#: activations fused into the op before them (no Q/DQ in between)
FUSED_ACTIVATIONS = frozenset({"Relu", "Clip"})
_NEVER = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv", "QLinearMatMul",
                    "ConvInteger", "MatMulInteger"})
_INT32_MAX = 2 ** 31 - 1


def _is_float(v: Value | None) -> bool:
    return v is not None and isinstance(v.type, TensorType) and v.type.dtype == DataType.FLOAT


def _is_const(v: Value | None, graph_inputs: set[int]) -> bool:
    return v is not None and v.const is not None and id(v) not in graph_inputs


@dataclass(frozen=True)
class QParams:
    """Per-tensor affine parameters of one activation."""

    scale: float
    zero_point: int
    dtype: str  #: int8 | uint8
    lo: float  #: the calibrated clipping range
    hi: float

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return np.array(self.scale, np.float32), np.array(self.zero_point, np.dtype(self.dtype))


@dataclass
class WeightSlot:
    node: Node
    index: int
    axis: int | None  #: None = per tensor


@dataclass
class QuantPlan:
    """What :func:`apply_plan` will do to a graph."""

    nodes: list[Node] = field(default_factory=list)
    activations: list[str] = field(default_factory=list)  #: tensors to calibrate and Q/DQ
    fused: dict[str, str] = field(default_factory=dict)  #: float tensor -> the Relu/Clip node it feeds
    shared: dict[str, str] = field(default_factory=dict)  #: tensor -> tensor whose parameters it reuses
    fixed: dict[str, tuple[float, float]] = field(default_factory=dict)  #: tensor -> range set by its op
    weights: list[WeightSlot] = field(default_factory=list)
    biases: dict[int, int] = field(default_factory=dict)  #: id(node) -> bias input index
    skipped: dict[str, str] = field(default_factory=dict)  #: node name -> why it stays float


def _eligible(n: Node, cfg: QuantizationConfig, graph_inputs: set[int]) -> str | None:
    """None when ``n`` is quantized, else why it stays float."""
    if n.name in cfg.exclude_nodes:
        return "excluded by configuration"
    if cfg.op_types is not None and n.op_type not in cfg.op_types:
        return f"op type {n.op_type} not in op_types"
    if n.domain not in ("", "ai.onnx"):
        return f"domain {n.domain!r}"
    if n.op_type in _NEVER:
        return "already quantized"
    if n.subgraphs():
        return "has sub-graphs"
    outs = [v for v in n.outputs if v.name]
    if not outs or not all(_is_float(v) for v in outs):
        return "an output is not float32"
    if not any(_is_float(v) and not _is_const(v, graph_inputs) for v in n.inputs):
        return "no float32 activation input"
    return None


def _weight_axis(n: Node, w: np.ndarray, per_channel: bool) -> int | None | str:
    """Channel axis of ``n``'s weight, None for per tensor, or a reason it is not quantized."""
    if n.op_type == "Conv":
        if w.ndim < 3:
            return "Conv weight of rank < 3"
        return 0 if per_channel else None
    if n.op_type == "Gemm":
        if w.ndim != 2:
            return "Gemm weight is not 2-D"
        return (0 if n.attr("transB", 0) else 1) if per_channel else None
    if n.op_type == "MatMul":
        if w.ndim != 2:  # batched constant: per tensor
            return None
        return 1 if per_channel else None
    return "not a weight op"  # pragma: no cover


def _fused_activations(chosen: list[Node], graph_outputs: set[int], graph_inputs: set[int]) -> dict[str, str]:
    """Float tensor -> the chosen Relu/Clip that is its only reader (fused into the op producing it)."""
    fused: dict[str, str] = {}
    chosen_ids = {id(n) for n in chosen}
    for n in chosen:
        if n.op_type in FUSED_ACTIVATIONS:
            continue
        outs = [v for v in n.outputs if v.name]
        if len(outs) != 1 or id(outs[0]) in graph_outputs:
            continue
        users = outs[0].consumers()
        if len(outs[0].uses) == 1 and users[0].op_type in FUSED_ACTIVATIONS and id(users[0]) in chosen_ids:
            act = users[0]
            if act.op_type == "Clip" and not all(_is_const(v, graph_inputs) for v in act.inputs[1:] if v is not None):
                continue
            fused[outs[0].name] = act.name
    return fused


def _plan_tensors(plan: QuantPlan, chosen: list[Node], cfg: QuantizationConfig, graph_outputs: set[int],
                  graph_inputs: set[int]) -> None:
    """Add the chosen nodes, their activations (in topological order), weights and fixed ranges to ``plan``."""
    seen: set[str] = set()

    def add(v: Value) -> None:
        if v.name not in seen and v.name not in plan.fused:
            seen.add(v.name)
            plan.activations.append(v.name)

    for n in chosen:
        plan.nodes.append(n)
        for i, v in enumerate(n.inputs):
            if v is None or not _is_float(v):
                continue
            if _is_const(v, graph_inputs):
                if n.op_type in WEIGHT_OPS and i == 1:
                    axis = _weight_axis(n, v.const, cfg.per_channel)
                    if not isinstance(axis, str):
                        plan.weights.append(WeightSlot(n, 1, axis))
                continue
            add(v)
        for v in n.outputs:
            if v.name and (cfg.quantize_outputs or id(v) not in graph_outputs):
                add(v)
                if n.op_type in FIXED_RANGES and v.name in seen:
                    plan.fixed[v.name] = FIXED_RANGES[n.op_type]


def _plan_biases(plan: QuantPlan, graph_inputs: set[int]) -> None:
    """Quantize a Conv/Gemm bias to int32 when its weight and activation input are quantized."""
    wnodes = {id(s.node): s for s in plan.weights}
    acts = set(plan.activations)
    for n in plan.nodes:
        s = wnodes.get(id(n))
        if s is None or n.op_type not in ("Conv", "Gemm") or len(n.inputs) < 3 or n.inputs[2] is None:
            continue
        b, x = n.inputs[2], n.inputs[0]
        if not _is_const(b, graph_inputs) or not _is_float(b) or x is None or x.name not in acts:
            continue
        w = n.inputs[1].const
        channels = w.shape[0] if n.op_type == "Conv" or n.attr("transB", 0) else w.shape[1]
        if b.const.shape != (channels,):
            continue
        if n.op_type == "Gemm" and (n.attr("alpha", 1.0) != 1.0 or n.attr("beta", 1.0) != 1.0
                                    or n.attr("transA", 0) not in (0, 1)):
            continue
        plan.biases[id(n)] = 2


def _plan_shared(plan: QuantPlan) -> None:
    """Data-movement outputs reuse their input's parameters (through to the tensor that owns them)."""
    acts = set(plan.activations)
    for n in plan.nodes:
        if n.op_type not in PASSTHROUGH_OPS or not n.inputs or n.inputs[0] is None:
            continue
        src = n.inputs[0].name
        if src not in acts:
            continue
        root = plan.shared.get(src, src)
        for v in n.outputs:
            if v.name in acts:
                plan.shared[v.name] = root


def plan_quantization(graph: Graph, cfg: QuantizationConfig) -> QuantPlan:
    """Choose the nodes, activations, weights and biases to quantize."""
    plan = QuantPlan()
    graph_inputs = {id(v) for v in graph.inputs}
    outputs = {id(v) for v in graph.outputs}
    chosen: list[Node] = []
    for n in graph.nodes:
        why = _eligible(n, cfg, graph_inputs)
        if why is None:
            chosen.append(n)
        else:
            plan.skipped[n.name or n.op_type] = why
    plan.fused = _fused_activations(chosen, outputs, graph_inputs)
    _plan_tensors(plan, chosen, cfg, outputs, graph_inputs)
    _plan_biases(plan, graph_inputs)
    _plan_shared(plan)
    return plan


def activation_qparams(lo: float, hi: float, cfg: QuantizationConfig) -> QParams:
    """Scale and zero point covering ``[lo, hi]`` (widened to include 0)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if cfg.symmetric:
        a = max(-lo, hi)
        scale = a / 127.0 if a > 0 else 1.0
        return QParams(float(np.float32(scale)), 0, "int8", -a, a)
    qmin, qmax = (-128, 127) if cfg.activation_type == "int8" else (0, 255)
    if hi - lo <= 0:
        return QParams(1.0, 0, cfg.activation_type, lo, hi)  # all zeros: exact with any scale
    scale = float(np.float32((hi - lo) / (qmax - qmin)))
    zp = int(np.clip(np.rint(qmin - lo / scale), qmin, qmax))
    return QParams(scale, zp, cfg.activation_type, lo, hi)


# ------------------------------------------------------------------ rewrite
class _Names:
    def __init__(self, graph: Graph) -> None:
        self.used = {v.name for v in graph.values()} | {n.name for n in graph.nodes if n.name}

    def __call__(self, base: str) -> str:
        name, k = base, 1
        while name in self.used:
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        return name


def _const(graph: Graph, names: _Names, base: str, arr: np.ndarray) -> Value:
    return graph.add_initializer(Value(names(base), const=np.array(arr, order="C")))  # keeps 0-d scalars 0-d


def _weight_scales(w: np.ndarray, axis: int | None) -> np.ndarray:
    if axis is None:
        a = np.array(np.abs(w).max() if w.size else 0.0, np.float64)
    else:
        red = tuple(i for i in range(w.ndim) if i != axis)
        a = np.abs(w).max(axis=red).astype(np.float64) if w.size else np.zeros(w.shape[axis])
    return np.where(a > 0, a / 127.0, 1.0)


def _quantize_weight(w: np.ndarray, scale: np.ndarray, axis: int | None) -> np.ndarray:
    s = scale.astype(np.float32)
    if axis is not None:
        shape = [1] * w.ndim
        shape[axis] = -1
        s = s.reshape(shape)
    return np.clip(np.rint(w.astype(np.float32) / s), -127, 127).astype(np.int8)


@dataclass
class RewriteReport:
    activations: int = 0
    weights: list[dict[str, Any]] = field(default_factory=list)
    biases: int = 0
    qdq_nodes: int = 0


def _bias_quantization(n: Node, bias_idx: int, scale: np.ndarray, axis: int | None,
                       params: dict[str, QParams]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The weight scale widened so ``n``'s bias fits int32 at ``x_scale * w_scale``, that bias scale
    (a scalar when per tensor) and the int32 bias."""
    b = n.inputs[bias_idx].const.astype(np.float64)
    xs = float(np.float32(params[n.inputs[0].name].scale))
    # a bias too large for int32 at x_scale*w_scale: widen that channel's (the tensor's) weight scale
    need = np.abs(b) / (xs * (_INT32_MAX - 1))
    scale = np.maximum(scale, need.max() if axis is None else need)
    bscale = (np.float32(xs) * scale.astype(np.float32)).astype(np.float32)  # scalar when per tensor
    bq = np.clip(np.rint(b / bscale.astype(np.float64)), -_INT32_MAX, _INT32_MAX).astype(np.int32)
    return scale, bscale, bq


def _dequantized_weight(graph: Graph, names: _Names, wv: Value, w: np.ndarray, scale32: np.ndarray,
                        axis: int | None, rep: RewriteReport) -> Value:
    """Add ``wv``'s int8 weight, its scale and zero point, and the DequantizeLinear reading them;
    return that DequantizeLinear's output (and record the weight in ``rep``)."""
    q = _quantize_weight(w, scale32, axis)
    qv = _const(graph, names, f"{wv.name}_quantized", q)
    sv = _const(graph, names, f"{wv.name}_scale", scale32 if axis is not None else scale32.reshape(()))
    zv = _const(graph, names, f"{wv.name}_zero_point",
                np.zeros(scale32.shape if axis is not None else (), np.int8))
    dq_out = Value(names(f"{wv.name}_dequantized"), TensorType(DataType.FLOAT, tuple(w.shape)))
    attrs = [Attribute("axis", AttrKind.INT, int(axis))] if axis is not None else []
    graph.add_node(Node("DequantizeLinear", [qv, sv, zv], [dq_out], name=names(f"{wv.name}_DequantizeLinear"),
                        attributes=attrs))
    rep.qdq_nodes += 1
    s_b = scale32.reshape([-1 if i == axis else 1 for i in range(w.ndim)]) if axis is not None else scale32
    err = float(np.abs(q.astype(np.float32) * s_b - w).max()) if w.size else 0.0
    rep.weights.append({"name": wv.name, "shape": list(w.shape), "axis": axis, "max_abs_error": err})
    return dq_out


def _dequantize_bias(graph: Graph, names: _Names, n: Node, bias_idx: int, bq: np.ndarray,
                     bscale: np.ndarray, per_channel: bool, rep: RewriteReport) -> None:
    """Make ``n`` read its bias as the int32 ``bq`` behind a DequantizeLinear."""
    bv = n.inputs[bias_idx]
    base = f"{n.name or bv.name}_bias"
    qv = _const(graph, names, f"{base}_quantized", bq)
    sv = _const(graph, names, f"{base}_scale", bscale if per_channel else bscale.reshape(()))
    zv = _const(graph, names, f"{base}_zero_point", np.zeros(bscale.shape if per_channel else (), np.int32))
    out = Value(names(f"{base}_dequantized"), TensorType(DataType.FLOAT, tuple(bq.shape)))
    attrs = [Attribute("axis", AttrKind.INT, 0)] if per_channel else []
    graph.add_node(Node("DequantizeLinear", [qv, sv, zv], [out], name=names(f"{base}_DequantizeLinear"),
                        attributes=attrs))
    graph.set_input(n, bias_idx, out)
    rep.biases += 1
    rep.qdq_nodes += 1


def _quantize_weights(graph: Graph, plan: QuantPlan, params: dict[str, QParams], names: _Names,
                      rep: RewriteReport) -> None:
    """Put every planned weight (and its node's bias) behind a DequantizeLinear; nodes sharing a weight
    at the same axis and scale share its DequantizeLinear."""
    wcache: dict[tuple[str, int | None, bytes], Value] = {}
    for slot in plan.weights:
        n = slot.node
        wv = n.inputs[slot.index]
        w = wv.const.astype(np.float32)
        axis = slot.axis
        scale = _weight_scales(w, axis)
        bias_idx = plan.biases.get(id(n))
        bq = bscale = None
        if bias_idx is not None:
            scale, bscale, bq = _bias_quantization(n, bias_idx, scale, axis, params)
        scale32 = scale.astype(np.float32)
        key = (wv.name, axis, scale32.tobytes())
        dq_out = wcache.get(key)
        if dq_out is None:
            dq_out = wcache[key] = _dequantized_weight(graph, names, wv, w, scale32, axis, rep)
        graph.set_input(n, slot.index, dq_out)
        if bq is not None:
            _dequantize_bias(graph, names, n, bias_idx, bq, bscale, axis is not None, rep)


def _drop_unused_initializers(graph: Graph) -> None:
    """Remove the initializers nothing reads any more (neither a graph input nor a graph output)."""
    inputs = {v.name for v in graph.inputs}
    for name, v in list(graph.initializers.items()):
        if not v.uses and name not in inputs and all(o is not v for o in graph.outputs):
            del graph.initializers[name]


def _quantize_activation(graph: Graph, names: _Names, v: Value, p: QParams) -> None:
    """Route every reader of ``v`` through ``QuantizeLinear -> DequantizeLinear`` with parameters ``p``;
    a graph output keeps its name (it becomes the DequantizeLinear's output)."""
    t = v.name
    s_arr, z_arr = p.arrays()
    sv = _const(graph, names, f"{t}_scale", s_arr)
    zv = _const(graph, names, f"{t}_zero_point", z_arr)
    qdt = DataType.INT8 if p.dtype == "int8" else DataType.UINT8
    qv = Value(names(f"{t}_quantized"), TensorType(qdt, v.shape))
    dqv = Value(names(f"{t}_dequantized"), TensorType(DataType.FLOAT, v.shape))
    was_output = any(o is v for o in graph.outputs)
    graph.replace_all_uses(v, dqv)
    graph.add_node(Node("QuantizeLinear", [v, sv, zv], [qv], name=names(f"{t}_QuantizeLinear")))
    graph.add_node(Node("DequantizeLinear", [qv, sv, zv], [dqv], name=names(f"{t}_DequantizeLinear")))
    if was_output and any(i is v for i in graph.inputs):  # an input passed straight through stays as is
        graph.outputs = [v if o is dqv else o for o in graph.outputs]
    elif was_output:  # the graph output keeps its name: it is now the DequantizeLinear's output
        old = names(f"{t}_float")
        names.used.add(t)
        v.name, dqv.name = old, t


def apply_plan(graph: Graph, plan: QuantPlan, params: dict[str, QParams], cfg: QuantizationConfig) -> RewriteReport:
    """Insert the Q/DQ pairs and quantized weights of ``plan`` into ``graph`` (in place)."""
    rep = RewriteReport()
    names = _Names(graph)
    vm = graph.value_map()
    # weights and biases before activations: biases read the original x value names
    _quantize_weights(graph, plan, params, names, rep)
    _drop_unused_initializers(graph)
    for t in plan.activations:
        _quantize_activation(graph, names, vm[t], params[t])
        rep.activations += 1
        rep.qdq_nodes += 2
    graph.topological_sort()
    graph.validate()
    return rep
