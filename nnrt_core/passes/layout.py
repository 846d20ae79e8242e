"""Transpose and reshape cancellation.

* a Transpose with the identity permutation is removed;
* ``Transpose(Transpose(x, p), q)`` becomes one Transpose with the composed
  permutation (or nothing when that is the identity);
* a chain of reshape-like ops (Reshape, Flatten, Squeeze, Unsqueeze) whose
  final shape is static becomes one Reshape to that shape;
* a reshape-like op whose input and output shapes are the same static shape
  is removed.

Only rewrites where the inner node is read by the outer one alone (so nothing
is computed twice).
"""
from __future__ import annotations

import numpy as np

from nnrt_core.ir import Attribute, AttrKind, Graph, Node, TensorType, Value
from nnrt_core.passes.base import Pass, PassContext, PassResult
from nnrt_core.passes.rewrite import GraphEditor, static_shape

__all__ = ["TransposeReshapeCancellation", "RESHAPE_LIKE"]

RESHAPE_LIKE = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})


def _perm(node: Node) -> list[int] | None:
    """The permutation of a Transpose (default: reversed axes, needs the rank)."""
    p = node.attr("perm")
    if p is not None:
        return [int(i) for i in p]
    x = node.inputs[0] if node.inputs else None
    rank = len(x.shape) if x is not None and x.shape is not None else None
    return None if rank is None else list(reversed(range(rank)))


def _is_tensor(v: Value | None) -> bool:
    return v is not None and isinstance(v.type, TensorType)


class TransposeReshapeCancellation(Pass):
    """Remove identity Transposes/reshapes and merge Transpose and
    reshape-like chains."""

    name = "transpose_reshape_cancellation"
    level = "extended"
    description = "cancel or merge Transpose pairs and reshape chains"
    requires_ops = (frozenset({"Transpose"}) | RESHAPE_LIKE,)

    def run(self, graph: Graph, ctx: PassContext | None = None) -> PassResult:
        ctx = ctx or PassContext()
        res = self.result()
        ed = GraphEditor(graph)
        for node in list(graph.nodes):
            if node.graph is not graph or node.domain != "" or not ctx.may_rewrite(node):
                continue
            if node.op_type == "Transpose":
                self._transpose(ed, ctx, node, res)
            elif node.op_type in RESHAPE_LIKE:
                self._reshape(ed, ctx, node, res)
        if res.changed:
            ed.drop_unread_initializers()
        return res

    # -- Transpose ----------------------------------------------------------
    def _transpose(self, ed: GraphEditor, ctx: PassContext, node: Node, res: PassResult) -> None:
        x, out = node.inputs[0], node.outputs[0]
        perm = _perm(node)
        if x is None or perm is None or not out.name:
            return
        inner = x.producer
        if (inner is not None and inner.graph is ed.graph and inner.op_type == "Transpose" and inner.domain == ""
                and ed.sole_reader(x) is node and ctx.may_rewrite(inner)):
            first = _perm(inner)
            if first is not None and len(first) == len(perm):
                src = inner.inputs[0]
                composed = [first[i] for i in perm]
                ed.graph.set_input(node, 0, src)
                node.attributes["perm"] = Attribute("perm", AttrKind.INTS, composed)
                ed.detach(inner)
                res.record(f"merged Transpose {inner.name!r} into {node.name!r} (perm {composed})", removed=1)
                x, perm = src, composed
        if x is not None and perm == list(range(len(perm))):
            if ed.bypass(node, out, x):
                res.record(f"removed identity Transpose {node.name!r}", removed=1)

    # -- reshape-like ---------------------------------------------------------
    def _reshape(self, ed: GraphEditor, ctx: PassContext, node: Node, res: PassResult) -> None:
        x, out = node.inputs[0] if node.inputs else None, node.outputs[0]
        if not _is_tensor(x) or not out.name or len(node.outputs) != 1:
            return
        shape_out = static_shape(out)
        if shape_out is None:
            return
        if static_shape(x) == shape_out:
            if ed.bypass(node, out, x):  # type: ignore[arg-type]
                res.record(f"removed no-op {node.op_type} {node.name!r}", removed=1)
            return
        inner = x.producer  # type: ignore[union-attr]
        if (inner is None or inner.graph is not ed.graph or inner.op_type not in RESHAPE_LIKE
                or inner.domain != "" or ed.sole_reader(x) is not node or not ctx.may_rewrite(inner)):  # type: ignore[arg-type]
            return
        src = inner.inputs[0]
        if not _is_tensor(src) or 0 in shape_out or ed.graph.opset_for("") < 5:
            return
        target = ed.add_constant(f"{out.name}_shape", np.array(shape_out, dtype=np.int64))
        index = ed.graph.nodes.index(node)
        ed.detach(node)
        ed.detach(inner)  # it came before `node`, so `node`'s slot is now index - 1
        merged = Node("Reshape", [src, target], [out], name=ed.fresh_name(f"{node.name or 'reshape'}_merged"),
                      opset=ed.graph.opset_for(""))
        ed.graph.add_node(merged, index=index - 1)
        res.record(f"merged {inner.op_type} {inner.name!r} + {node.op_type} {node.name!r} into one Reshape",
                   removed=2, added=1)
