"""Layer normalization written out as ops becomes one ``LayerNormalization``.

Converters write a layer norm over the last axis as::

    m = ReduceMean(x, [-1]); d = Sub(x, m); v = ReduceMean(Mul(d, d), [-1])
    s = Sqrt(Add(v, eps)); n = Mul(d, Reciprocal(s))   (or Div(d, s); Pow(d, 2) for Mul(d, d))
    y = Add(Mul(n, gamma), beta)                       (gamma, beta optional constants)

ten nodes that engines run one by one (ONNX Runtime's own fusion expects
``Pow`` / ``Div``, so TFLite's ``RSQRT`` form stays unfused there).  The pass
writes ``LayerNormalization(x, gamma, beta, axis=-1, epsilon=eps)`` (opset
17 on) where every selected backend that runs the replaced nodes runs it.
Both compute the mean, then the variance of the centred values, in float32:
results differ in the last bits only (``tests/test_pass_layernorm.py``).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from nnrt_core.ir import Attribute, AttrKind, Graph, Node, Value
from nnrt_core.ir.dtypes import DataType
from nnrt_core.passes.base import Pass, PassContext, PassResult
from nnrt_core.passes.rewrite import GraphEditor, is_constant, static_shape

__all__ = ["LayerNormFusion"]


def _const(v: Value | None) -> np.ndarray | None:
    return v.const if is_constant(v) else None  # type: ignore[union-attr]


class _Match:
    """The nodes of one written-out layer norm and what the fused node needs."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.eps = 0.0
        self.gamma: np.ndarray | None = None
        self.beta: np.ndarray | None = None
        self.out: Value | None = None


class LayerNormFusion(Pass):
    """Fuse a written-out last-axis layer norm into ``LayerNormalization``."""

    name = "layernorm_fusion"
    level = "basic"
    description = "fuse ReduceMean/Sub/Mul/ReduceMean/Add/Sqrt/Reciprocal/Mul(/Mul/Add) into LayerNormalization"
    requires_ops = (frozenset({"ReduceMean"}), frozenset({"Sqrt"}))

    def run(self, graph: Graph, ctx: PassContext | None = None) -> PassResult:
        ctx = ctx or PassContext()
        res = self.result()
        if graph.opset_for("") < 17:
            return res
        ed = GraphEditor(graph)
        for node in list(graph.nodes):
            if node.graph is not graph or node.op_type != "ReduceMean" or node.domain != "":
                continue
            m = _match(ed, node)
            if m is None or not ctx.may_rewrite(*m.nodes):
                continue
            self._fuse(ed, ctx, node.inputs[0], m, res)  # type: ignore[arg-type]
        if res.changed:
            ed.drop_unread_initializers()
        return res

    def _fuse(self, ed: GraphEditor, ctx: PassContext, x: Value, m: _Match, res: PassResult) -> None:
        c = int(static_shape(x)[-1])  # type: ignore[index]
        gamma = ed.add_constant(f"{m.out.name}_ln_scale",  # type: ignore[union-attr]
                                np.ones(c, np.float32) if m.gamma is None else m.gamma)
        beta = ed.add_constant(f"{m.out.name}_ln_bias",  # type: ignore[union-attr]
                               np.zeros(c, np.float32) if m.beta is None else m.beta)
        fused = Node("LayerNormalization", [x, gamma, beta], [m.out], name=ed.fresh_name(f"{m.nodes[0].name}_ln"),
                     opset=ed.graph.opset_for(""),
                     attributes=[Attribute("axis", AttrKind.INT, -1), Attribute("epsilon", AttrKind.FLOAT, m.eps)])
        if not ctx.backend_supports(fused, m.nodes):
            return
        index = min(ed.graph.nodes.index(n) for n in m.nodes)
        for n in m.nodes:
            ed.detach(n)
        ed.graph.add_node(fused, index=index)
        res.record(f"fused the layer norm of {x.name!r} ({len(m.nodes)} nodes) into {fused.name!r}",
                   removed=len(m.nodes), added=1)


def _last_axis_mean(ed: GraphEditor, node: Node, x: Value) -> bool:
    """``node`` is ReduceMean(x) over the last axis only, keeping dims."""
    if node.op_type != "ReduceMean" or node.inputs[0] is not x or not node.attr("keepdims", 1):
        return False
    shape = static_shape(x)
    axes = node.attr("axes")
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = _const(node.inputs[1])
    if shape is None or axes is None or np.size(axes) != 1:
        return False
    return int(np.asarray(axes).reshape(())) in (-1, len(shape) - 1)


def _sole(ed: GraphEditor, v: Value, op: str) -> Node | None:
    n = ed.sole_reader(v)
    return n if n is not None and n.op_type == op and n.domain == "" and len(n.outputs) == 1 else None


def _other(node: Node, v: Value) -> Value | None:
    """The input of binary ``node`` that is not ``v``."""
    a, b = (node.inputs + [None, None])[:2]
    return b if a is v else a if b is v else None


def _match(ed: GraphEditor, mean: Node) -> _Match | None:
    x = mean.inputs[0]
    if x is None or x.dtype != DataType.FLOAT or not _last_axis_mean(ed, mean, x):
        return None
    sub = _sole(ed, mean.outputs[0], "Sub")
    if sub is None or sub.inputs[0] is not x or sub.inputs[1] is not mean.outputs[0]:
        return None
    d = sub.outputs[0]
    readers = ed.readers(d)
    if ed.is_output(d) or id(d) in ed.subgraph_reads or len(readers) != 2:
        return None
    square = next((n for n in readers if _squares(n, d)), None)
    norm = next((n for n in readers if n is not square), None)
    if square is None or norm is None:
        return None
    var = _sole(ed, square.outputs[0], "ReduceMean")
    if var is None or not _last_axis_mean(ed, var, square.outputs[0]):
        return None
    add = _sole(ed, var.outputs[0], "Add")
    eps = _const(_other(add, var.outputs[0])) if add is not None else None
    if eps is None or eps.size != 1 or not 0 <= float(eps.reshape(())) < 1:
        return None
    sqrt = _sole(ed, add.outputs[0], "Sqrt")  # type: ignore[union-attr]
    chain = _normalized(ed, sqrt, norm, d) if sqrt is not None else None
    if chain is None:
        return None
    m = _Match()
    m.eps = float(eps.reshape(()))
    m.nodes = [mean, sub, square, var, add, sqrt, *chain]  # type: ignore[list-item]
    _affine(ed, m, x)
    return m


def _squares(node: Node, d: Value) -> bool:
    if node.op_type == "Mul" and node.domain == "":
        return node.inputs[0] is d and node.inputs[1] is d
    if node.op_type == "Pow" and node.domain == "" and node.inputs[0] is d:
        e = _const(node.inputs[1])
        return e is not None and e.size == 1 and float(e.reshape(())) == 2.0
    return False


def _normalized(ed: GraphEditor, sqrt: Node, norm: Node, d: Value) -> Sequence[Node] | None:
    """[Reciprocal, Mul] or [Div]: ``d`` divided by the standard deviation."""
    s = sqrt.outputs[0]
    if norm.op_type == "Div" and norm.inputs[0] is d and norm.inputs[1] is s and ed.sole_reader(s) is norm:
        return [norm]
    rec = _sole(ed, s, "Reciprocal")
    if rec is not None and norm.op_type == "Mul" and _other(norm, d) is rec.outputs[0] \
            and ed.sole_reader(rec.outputs[0]) is norm:
        return [rec, norm]
    return None


def _affine(ed: GraphEditor, m: _Match, x: Value) -> None:
    """Take a following ``Mul`` by gamma and ``Add`` of beta (constants over the last axis) into the match."""
    c = int(static_shape(x)[-1])  # type: ignore[index]
    out = m.nodes[-1].outputs[0]
    for op, field in (("Mul", "gamma"), ("Add", "beta")):
        n = _sole(ed, out, op) if not ed.is_output(out) else None
        k = _const(_other(n, out)) if n is not None else None
        if k is None or k.dtype != np.float32 or k.size != c or k.shape[-1:] != (c,) or k.ndim > len(x.shape or ()):
            break
        setattr(m, field, np.ascontiguousarray(k.reshape(c)))
        m.nodes.append(n)  # type: ignore[arg-type]
        out = n.outputs[0]  # type: ignore[union-attr]
    m.out = out
