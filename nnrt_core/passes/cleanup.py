"""Removing nodes that compute nothing: dead nodes and no-op nodes
(Identity, inference-mode Dropout, Cast to the type it already has)."""
from __future__ import annotations

from nnrt_core.ir import Graph, Node
from nnrt_core.ir.dtypes import DataType
from nnrt_core.passes.base import Pass, PassContext, PassResult
from nnrt_core.passes.rewrite import GraphEditor, is_constant

__all__ = ["DeadNodeElimination", "IdentityElimination", "REMOVABLE_DOMAINS"]

#: domains whose ops have no side effects, so an unread node can go
REMOVABLE_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "com.microsoft"})


class DeadNodeElimination(Pass):
    """Remove nodes none of whose outputs is read (by a node, a sub-graph or
    as a graph output), and initializers nothing reads."""

    name = "dead_node_elimination"
    level = "basic"
    description = "remove nodes whose outputs nothing reads"
    idempotent = True  # scans again until a scan removes nothing
    removes_only_unread = True

    def run(self, graph: Graph, ctx: PassContext | None = None) -> PassResult:
        ctx = ctx or PassContext()
        res = self.result()
        while True:  # once more after a removal: a graph out of order, or sub-graph reads, can leave dead chains
            ed = GraphEditor(graph)
            before = res.rewrites
            for node in reversed(list(graph.nodes)):  # readers first, so whole dead chains go in one sweep
                if node.domain not in REMOVABLE_DOMAINS or not ctx.may_rewrite(node):
                    continue
                if any(v.name and ed.is_read(v) for v in node.outputs):
                    continue
                ed.detach(node)
                res.record(f"removed unread {node.op_type} {node.name!r}", removed=1)
            if res.rewrites == before:
                break
        ed.drop_unread_initializers()
        return res


def _is_noop(node: Node) -> bool:
    op = node.op_type
    if node.domain != "" or not node.inputs or node.inputs[0] is None:
        return False
    if op == "Identity":
        return True
    if op == "Dropout":
        if (node.opset or 1) < 12:
            return True  # opsets 1-11 run Dropout in inference mode here
        training = node.inputs[2] if len(node.inputs) > 2 else None
        return training is None or (is_constant(training) and not bool(training.const))
    if op == "Cast":
        src = node.inputs[0].dtype
        to = node.attr("to")
        try:
            return src is not None and to is not None and src == DataType(int(to))
        except ValueError:
            return False
    return False


class IdentityElimination(Pass):
    """Bypass Identity, inference-mode Dropout (when its mask is unread) and
    Cast to the input's own type.  A no-op writing a graph output is removed
    only when its input's producer can write the output name instead."""

    name = "identity_elimination"
    level = "basic"
    description = "bypass Identity, inference Dropout and same-type Cast"
    requires_ops = (frozenset({"Identity", "Dropout", "Cast"}),)  # what _is_noop matches

    def run(self, graph: Graph, ctx: PassContext | None = None) -> PassResult:
        ctx = ctx or PassContext()
        res = self.result()
        ed = GraphEditor(graph)
        for node in list(graph.nodes):
            if not _is_noop(node) or not ctx.may_rewrite(node):
                continue
            out, src = node.outputs[0], node.inputs[0]
            if not out.name or src is None:
                continue
            if ed.bypass(node, out, src):
                res.record(f"bypassed {node.op_type} {node.name!r}", removed=1)
        return res
