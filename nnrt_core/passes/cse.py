"""Common-subexpression elimination: two nodes with the same op, attributes
and inputs compute the same thing, so the second one's readers can read the
first one's outputs."""
from __future__ import annotations

from typing import Any, Hashable

import numpy as np

from nnrt_core.ir import AttrKind, Graph, Node, Value
from nnrt_core.passes.base import Pass, PassContext, PassResult
from nnrt_core.passes.constant_folding import NONDETERMINISTIC_OPS
from nnrt_core.passes.rewrite import GraphEditor, is_constant

__all__ = ["CommonSubexpressionElimination"]

#: constants up to this many elements are compared by content, larger ones by identity
_SMALL_CONST = 64


def _array_key(a: np.ndarray) -> Hashable:
    a = np.asarray(a)
    if a.dtype == object:
        return ("obj", a.shape, tuple(map(repr, a.reshape(-1).tolist())))
    return (a.dtype.str, a.shape, a.tobytes())


def _attr_key(value: Any) -> Hashable:
    if isinstance(value, np.ndarray):
        return _array_key(value)
    if isinstance(value, (list, tuple)):
        return tuple(_attr_key(v) for v in value)
    if isinstance(value, float) and value != value:
        return ("nan",)
    return value


def _input_key(v: Value | None) -> Hashable:
    if v is None:
        return None
    if is_constant(v) and v.const.size <= _SMALL_CONST:  # type: ignore[union-attr]
        return ("const", _array_key(v.const))  # type: ignore[arg-type]
    return id(v)


def _cheap_key(node: Node) -> Hashable | None:
    """The op and its inputs, by identity (no content hashing): nodes whose
    cheap keys differ cannot merge; None when the node must not be merged."""
    if node.op_type in NONDETERMINISTIC_OPS or node.domain not in ("", "ai.onnx", "ai.onnx.ml"):
        return None
    return (node.op_type, len(node.attributes), tuple(
        None if v is None else ("const", v.const.shape) if v.const is not None and v.producer is None else id(v)
        for v in node.inputs))


def _node_key(node: Node) -> Hashable | None:
    """What makes two nodes compute the same outputs, or None when the node
    must not be merged (random ops, sub-graphs, unknown domains)."""
    if node.op_type in NONDETERMINISTIC_OPS or node.domain not in ("", "ai.onnx", "ai.onnx.ml"):
        return None
    attrs = []
    for name, a in sorted(node.attributes.items()):
        if a.kind in (AttrKind.GRAPH, AttrKind.GRAPHS) or a.ref_attr_name is not None:
            return None
        try:
            key = _attr_key(a.value)
            hash(key)
        except TypeError:
            return None
        attrs.append((name, key))
    return (node.domain, node.op_type, node.opset, tuple(_input_key(v) for v in node.inputs),
            tuple(bool(v.name) for v in node.outputs), tuple(attrs))


class CommonSubexpressionElimination(Pass):
    """Merge nodes that compute the same thing from the same inputs.  A
    duplicate writing a graph output is kept (its name must survive).
    Nodes are first grouped by a cheap key (op, inputs by identity); the full
    key (attributes, small constants by content) is only built for nodes that
    share one, so a graph without candidates hashes no attribute."""

    name = "common_subexpression_elimination"
    level = "basic"
    description = "merge nodes with identical op, attributes and inputs"
    counts_readers = False  # keys are ops, attributes and inputs; deleting unread nodes rewires nothing

    def run(self, graph: Graph, ctx: PassContext | None = None) -> PassResult:
        ctx = ctx or PassContext()
        res = self.result()
        ed = GraphEditor(graph)
        groups: dict[Hashable, list[Node]] = {}  # cheap key -> nodes kept, in graph order
        keys: dict[int, Hashable | None] = {}  # id(node) -> full key, built on demand

        def full_key(n: Node) -> Hashable | None:
            if id(n) not in keys:
                keys[id(n)] = _node_key(n)
            return keys[id(n)]

        for node in list(graph.nodes):
            if not ctx.may_rewrite(node):
                continue
            cheap = _cheap_key(node)
            if cheap is None:
                continue
            group = groups.setdefault(cheap, [])
            first = None
            if group:
                key = full_key(node)
                if key is None:
                    continue
                first = next((n for n in group if full_key(n) == key), None)
            if first is None:
                group.append(node)
                continue
            if any(ed.is_output(v) for v in node.outputs):
                continue
            for dup, orig in zip(node.outputs, first.outputs):
                if dup.name:
                    ed.replace_uses(dup, orig)
            ed.detach(node)
            res.record(f"merged {node.op_type} {node.name!r} into {first.name!r}", removed=1)
        if res.changed:
            ed.drop_unread_initializers()
        return res
