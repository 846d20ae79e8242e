"""Constant folding: nodes whose inputs are all constants become initializers.

Real models often compute weights at run time (the onnx `light` models build
every weight with ``ConstantOfShape``); folding them before placement lets
every backend see constant weights (an NPU compiles them into its program) and
saves recomputing them on every run.  Nodes are evaluated by an existing
backend (the embedded NumPy one), through the ordinary backend contract.
"""
from __future__ import annotations


import numpy as np

from nnrt_core.backend.base import Backend, CompileOptions
from nnrt_core.errors import NnrtError
from nnrt_core.ir import Graph, Node, Value
from nnrt_core.ir.clone import extract_subgraph
from nnrt_core.logs import get_logger
from nnrt_core.passes.base import Pass, PassContext, PassResult
from nnrt_core.passes.host_fold import host_value
from nnrt_core.passes.rewrite import GraphEditor, static_shape

__all__ = ["fold_constants", "ConstantFolding", "ShapeFolding", "NONDETERMINISTIC_OPS", "QDQ_OPS"]

log = get_logger("nnrt.passes")

#: ops whose outputs must not be frozen even with constant inputs
NONDETERMINISTIC_OPS = frozenset({
    "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli",
})

#: kept even with constant inputs (as ONNX Runtime does): int8 backends recognise
#: DequantizeLinear -> op -> QuantizeLinear patterns on weights
QDQ_OPS = frozenset({"DequantizeLinear", "QuantizeLinear"})


def _foldable(node: Node) -> bool:
    # the input test first: it fails on almost every node of a graph with nothing to fold
    if not all(v is None or (v.const is not None and v.producer is None) for v in node.inputs):
        return False
    if node.op_type in NONDETERMINISTIC_OPS or node.op_type in QDQ_OPS or node.subgraphs() or node.domain not in ("", "ai.onnx"):
        return False
    return all(v.name for v in node.outputs)


def fold_constants(graph: Graph, evaluator: Backend, *, protected: frozenset[str] = frozenset()) -> int:
    """Fold every foldable node of ``graph`` (in order, so chains fold too).

    Returns the number of nodes folded.  A node the evaluator cannot run (or
    named in ``protected``) is left in place.
    """
    return len(_fold(graph, evaluator, protected))


def _fold(graph: Graph, evaluator: Backend, protected: frozenset[str]) -> list[Node]:
    """Fold in rounds: ``Constant`` nodes and the trivial cases of
    :mod:`~nnrt_core.passes.host_fold` here, as they come; every other
    node whose inputs are all constants now goes to the evaluator with the
    others of its round, in one compiled partition (:func:`_evaluate`).
    Nodes of a round read no other node of it, so each is evaluated alone,
    on the same inputs, as one by one; the next round takes the nodes that
    read their results (chains)."""
    folded: list[Node] = []
    tried: set[int] = set()  # nodes the evaluator refused or failed on: not asked again
    while True:
        batch, constants, hosted = [], [], []
        nodes = list(graph.nodes)  # the order before this round's drops (``folded`` lists by it)
        for node in nodes:
            if id(node) in tried or not _foldable(node) or node.name in protected:
                continue
            value = _constant_value(node)
            if value is not None:  # most exporters write every weight as a Constant node: no backend needed
                _freeze(graph, node, [value], detach=False)
                constants.append(node)
            elif (values := host_value(node)) is not None:  # a trivial case: no backend either
                _freeze(graph, node, values, detach=False)
                hosted.append(node)
            elif all(v is None or v.producer is None for v in node.inputs):
                batch.append(node)
        _drop(graph, constants + hosted)
        folded += constants
        tried.update(id(n) for n in batch)
        done = _evaluate(graph, evaluator, batch) if batch else []
        for node, values in done:
            _freeze(graph, node, values, detach=False)
        _drop(graph, [n for n, _ in done])
        if not done and not hosted and not constants:  # nothing new is constant: a fixed point (idempotent)
            break
        # listed as the evaluator's round would list them (graph order after the Constants)
        position = {id(n): i for i, n in enumerate(nodes)}
        folded += sorted(hosted + [n for n, _ in done], key=lambda n: position[id(n)])
    # drop initializers nothing reads any more (e.g. the shape inputs of folded nodes)
    GraphEditor(graph).drop_unread_initializers()
    return folded


def _evaluate(graph: Graph, evaluator: Backend, nodes: list[Node]) -> list[tuple[Node, list[np.ndarray]]]:
    """(node, output values) for the ``nodes`` (independent, constant
    inputs) the evaluator runs: one partition for all of them; when it
    refuses some, they are left out; when compiling or running it fails, each
    node is tried alone so that only the failing ones stay unfolded."""
    options = CompileOptions()
    try:
        sub = extract_subgraph(graph, nodes, [], [v for n in nodes for v in n.outputs], name=f"fold_{nodes[0].name}")
        rejected = evaluator.capability(sub, options).rejected
        if rejected:
            keep = [n for n in nodes if n.name not in rejected]
            return _evaluate(graph, evaluator, keep) if keep and len(keep) < len(nodes) else []
        results = evaluator.compile(sub, options).run({})
    except NnrtError as e:
        if len(nodes) > 1:
            return [r for n in nodes for r in _evaluate(graph, evaluator, [n])]
        log.info("constant folding skipped %s (%s): %s", nodes[0].name, nodes[0].op_type, e)
        return []
    out = []
    for n in nodes:
        values = [results[v.name] for v in n.outputs]
        if all(isinstance(x, np.ndarray) for x in values):
            out.append((n, values))
    return out


#: numeric attribute forms of Constant -> the dtype they stand for (None: a tensor already)
_CONSTANT_FORMS = {"value": None, "value_float": np.float32, "value_floats": np.float32,
                   "value_int": np.int64, "value_ints": np.int64}


def _constant_value(node: Node) -> np.ndarray | None:
    """The (read-only) value of an ONNX ``Constant`` with one numeric attribute,
    computed here; ``None`` for anything else (the evaluator backend decides)."""
    if node.op_type != "Constant" or node.domain not in ("", "ai.onnx") or len(node.attributes) != 1:
        return None
    (form, attr), = node.attributes.items()
    if form not in _CONSTANT_FORMS:
        return None
    dtype = _CONSTANT_FORMS[form]
    if dtype is None:
        if not isinstance(attr.value, np.ndarray) or attr.value.dtype == object:
            return None
        value = attr.value.view()
    else:
        value = np.array(attr.value, dtype=dtype)
        value = value.reshape(-1) if form.endswith("s") else value
    value.flags.writeable = False
    return value


def _freeze(graph: Graph, node: Node, values: list[np.ndarray], *, detach: bool = True) -> None:
    """Replace ``node`` by initializers holding its output ``values``
    (``detach=False``: the caller takes it out of ``graph.nodes``, see :func:`_drop`)."""
    for i, v in enumerate(node.inputs):
        if v is not None:
            v.uses = [(n, j) for n, j in v.uses if not (n is node and j == i)]
    if detach:
        graph.nodes.remove(node)
    node.graph = None
    for v, x in zip(node.outputs, values):
        v.producer, v.output_index = None, -1
        v.const = x
        graph.initializers[v.name] = v


def _drop(graph: Graph, nodes: list[Node]) -> None:
    """Take ``nodes`` out of ``graph.nodes`` in one pass (a ``list.remove`` each is
    quadratic: real models write hundreds of weights as Constant nodes)."""
    if nodes:
        gone = {id(n) for n in nodes}
        graph.nodes[:] = [n for n in graph.nodes if id(n) not in gone]


class ConstantFolding(Pass):
    """Evaluate nodes whose inputs are all constants (with the context's
    evaluator backend) and keep their outputs as initializers."""

    name = "constant_folding"
    level = "basic"
    description = "evaluate nodes with constant inputs once"
    idempotent = True  # folds in rounds until nothing is left to fold
    counts_readers = False

    def run(self, graph: Graph, ctx: PassContext | None = None) -> PassResult:
        ctx = ctx or PassContext()
        res = self.result()
        if ctx.evaluator is None:
            return res
        for node in _fold(graph, ctx.evaluator, ctx.protected):
            res.record(f"folded {node.op_type} {node.name!r}", removed=1)
        return res


def _shape_of(node: Node) -> np.ndarray | None:
    """The value of a Shape/Size node whose input has a fully static shape."""
    x: Value | None = node.inputs[0] if node.inputs else None
    shape = static_shape(x)
    if shape is None or node.domain != "" or len(node.outputs) != 1:
        return None
    if node.op_type == "Shape":
        start, end = node.attr("start", 0), node.attr("end")
        return np.array(shape[int(start):None if end is None else int(end)], dtype=np.int64)
    if node.op_type == "Size":
        return np.array(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
    return None


class ShapeFolding(Pass):
    """Shape and Size of a value whose shape is fully static become
    constants; constant folding then evaluates what is computed from them."""

    name = "shape_folding"
    level = "basic"
    description = "Shape/Size of statically shaped values become constants"
    counts_readers = False

    def run(self, graph: Graph, ctx: PassContext | None = None) -> PassResult:
        ctx = ctx or PassContext()
        res = self.result()
        for node in list(graph.nodes):
            if node.op_type not in ("Shape", "Size") or not ctx.may_rewrite(node):
                continue
            value = _shape_of(node)
            if value is None or not node.outputs[0].name:
                continue
            _freeze(graph, node, [value])
            res.record(f"{node.op_type} {node.name!r} = {value.tolist()}", removed=1)
        if res.changed:
            GraphEditor(graph).drop_unread_initializers()
        return res
