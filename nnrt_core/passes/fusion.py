"""Activation fusion into ``com.microsoft`` FusedConv / FusedGemm.

``Conv -> act`` becomes ``FusedConv(activation=act)`` and ``Gemm -> act``
becomes ``FusedGemm(activation=act)``, for the activations both the NumPy
backend and ONNX Runtime's CPU kernels implement (Relu, LeakyRelu, Sigmoid,
Tanh, Clip with constant bounds, HardSigmoid).  A contrib op changes which
backends can run the node, so every fusion is first checked against the
selected backends (:class:`BackendSupport`): a backend that would have run
the Conv and the activation must also accept the fused node.
"""
from __future__ import annotations

from typing import Callable, Sequence

from nnrt_core.backend.base import Backend, CompileOptions
from nnrt_core.errors import NnrtError
from nnrt_core.ir import Attribute, AttrKind, Graph, Node, Value
from nnrt_core.ir.clone import extract_subgraph
from nnrt_core.ir.dtypes import DataType
from nnrt_core.logs import get_logger
from nnrt_core.passes.base import Pass, PassContext, PassResult
from nnrt_core.passes.rewrite import GraphEditor, clip_bounds, is_constant

__all__ = ["ActivationFusion", "BackendSupport", "MS_DOMAIN", "FUSABLE_ACTIVATIONS"]

log = get_logger("nnrt.passes")

MS_DOMAIN = "com.microsoft"
FUSABLE_ACTIVATIONS = frozenset({"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid"})


def _activation_params(act: Node) -> list[float] | None:
    """Positional parameters of a fusable activation, None when it cannot fuse."""
    op = act.op_type
    if act.domain != "" or op not in FUSABLE_ACTIVATIONS or len(act.outputs) != 1:
        return None
    if op == "LeakyRelu":
        return [float(act.attr("alpha", 0.01))]
    if op == "HardSigmoid":
        return [float(act.attr("alpha", 0.2)), float(act.attr("beta", 0.5))]
    if op == "Clip":
        flt_max = 3.4028234663852886e38
        bounds = clip_bounds(act, (-flt_max, flt_max))
        if bounds is None:
            return None
        lo, hi = bounds
        return [lo, hi] if (act.opset or 1) < 11 else [max(lo, -flt_max), min(hi, flt_max)]
    return []


def _fused_node(ed: GraphEditor, base: Node, act: Node, params: list[float]) -> Node:
    """The fused node (not yet in the graph), reading ``base``'s inputs and
    writing a scratch value (swapped for ``act``'s output when adopted)."""
    attrs = [Attribute(a.name, a.kind, a.value, a.ref_attr_name) for a in base.attributes.values()
             if a.name != "broadcast"]  # Gemm-1..6 only; FusedGemm always broadcasts C
    attrs.append(Attribute("activation", AttrKind.STRING, act.op_type))
    if base.op_type == "Conv":
        op = "FusedConv"
        if params:
            attrs.append(Attribute("activation_params", AttrKind.FLOATS, params))
    else:
        op = "FusedGemm"
        for key, p in zip(("activation_alpha", "activation_beta", "activation_gamma"), params):
            attrs.append(Attribute(key, AttrKind.FLOAT, p))
    out = act.outputs[0]
    scratch = Value(out.name, out.type)
    return Node(op, list(base.inputs), [scratch], name=base.name, domain=MS_DOMAIN, opset=1, attributes=attrs)


class ActivationFusion(Pass):
    """Conv/Gemm followed by a fusable activation becomes FusedConv/FusedGemm
    where the selected backends support the fused op."""

    name = "activation_fusion"
    level = "all"
    description = "fuse Conv/Gemm + activation into com.microsoft FusedConv/FusedGemm"
    requires_ops = (frozenset({"Conv", "Gemm"}), FUSABLE_ACTIVATIONS)

    def run(self, graph: Graph, ctx: PassContext | None = None) -> PassResult:
        ctx = ctx or PassContext()
        res = self.result()
        ed = GraphEditor(graph)
        for node in list(graph.nodes):
            if node.graph is not graph or node.domain != "" or node.op_type not in ("Conv", "Gemm"):
                continue
            y = node.outputs[0] if len(node.outputs) == 1 and node.outputs[0].name else None
            act = ed.sole_reader(y) if y is not None else None
            if act is None or act.inputs[0] is not y or not ctx.may_rewrite(node, act):
                continue
            if y.dtype not in (DataType.FLOAT, DataType.DOUBLE):  # type: ignore[union-attr]
                continue  # ORT's fused kernels are float/double only
            params = _activation_params(act)
            if params is None:
                continue
            fused = _fused_node(ed, node, act, params)
            if not ctx.backend_supports(fused, [node, act]):
                continue
            out = act.outputs[0]
            index = graph.nodes.index(node)
            ed.detach(act)
            ed.detach(node)
            fused.outputs = [out]
            graph.add_node(fused, index=index)
            graph.opset_imports.setdefault(MS_DOMAIN, 1)
            res.record(f"fused {node.op_type} {node.name!r} + {act.op_type} {act.name!r} into {fused.op_type}",
                       removed=2, added=1)
        return res


class BackendSupport:
    """The ``supports`` check of a :class:`PassContext` for a session's
    backends: a fused node is allowed when every backend that accepts all the
    nodes it replaces also accepts it (probed with one-node graphs through the
    ordinary capability query; answers cached per signature)."""

    def __init__(self, backends: Sequence[Backend], options: Callable[[str], CompileOptions]) -> None:
        self.backends = list(backends)
        self.options = options
        self._cache: dict[tuple, bool] = {}

    def __call__(self, fused: Node, replaced: Sequence[Node]) -> bool:
        graph = replaced[0].graph
        if graph is None:
            return False
        key = (_signature(fused), tuple(_signature(n) for n in replaced))
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._check(graph, fused, replaced)
        return hit

    def chain(self, fused: Node, chain: Sequence[Node]) -> bool:
        """Like a call, but the replaced nodes (in graph order, the last one writing what ``fused`` writes)
        are probed together as one sub-graph: a backend that runs them only as a group (an int8 NPU runs
        ``DequantizeLinear -> op -> QuantizeLinear`` groups whose middle op it declines alone) counts too."""
        graph = chain[0].graph if chain else None
        if graph is None:
            return False
        key = ("chain", _signature(fused), tuple(_signature(n) for n in chain))
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._check(graph, fused, chain, together=True)
        return hit

    def _check(self, graph: Graph, fused: Node, replaced: Sequence[Node], together: bool = False) -> bool:
        try:
            probe_fused = _probe(graph, fused)
            probes = [_chain_probe(graph, replaced)] if together else [_probe(graph, n) for n in replaced]
        except (NnrtError, KeyError) as e:
            log.info("fusion probe for %s failed: %s", fused.name, e)
            return False
        wanted = 0
        for b in self.backends:
            opts = self.options(b.name)
            try:
                if any(b.capability(p, opts).rejected for p in probes):
                    continue  # this backend would not have run the originals anyway
                wanted += 1
                if b.capability(probe_fused, opts).rejected:
                    return False
            except NnrtError as e:
                log.info("fusion probe on %s failed: %s", b.name, e)
                return False
        return wanted > 0


def _signature(node: Node) -> tuple:
    attrs = tuple(sorted((k, repr(a.value)) for k, a in node.attributes.items()))
    ins = tuple(None if v is None else (str(v.type), is_constant(v)) for v in node.inputs)
    return (node.domain, node.op_type, node.opset, attrs, ins)


def _chain_probe(graph: Graph, nodes: Sequence[Node]) -> Graph:
    """A graph running copies of ``nodes`` (in order): what they read from outside (constants aside) are its
    inputs, the last node's outputs its outputs."""
    inside = {id(v) for n in nodes for v in n.outputs}
    inputs: list[Value] = []
    for n in nodes:
        for v in n.inputs:
            if v is not None and id(v) not in inside and not is_constant(v) and all(v is not x for x in inputs):
                inputs.append(v)
    outputs = [v for v in nodes[-1].outputs if v.name]
    return extract_subgraph(graph, nodes, inputs, outputs, name=f"probe_{nodes[-1].name}")


def _probe(graph: Graph, node: Node) -> Graph:
    """A one-node graph running a copy of ``node`` (non-constant inputs become graph inputs)."""
    inputs: list[Value] = []
    for v in node.inputs:
        if v is not None and not is_constant(v) and all(v is not x for x in inputs):
            inputs.append(v)
    outputs = [Value(v.name or f"{node.name}_unused_{i}", v.type) for i, v in enumerate(node.outputs)]
    copy = Node(node.op_type, list(node.inputs), outputs, name=node.name or "probe", domain=node.domain,
                opset=node.opset, attributes=node.attributes.values())
    sub = extract_subgraph(graph, [copy], inputs, outputs, name=f"probe_{node.name}")
    if node.domain and node.domain not in sub.opset_imports:
        sub.opset_imports[node.domain] = node.opset or 1
    return sub
