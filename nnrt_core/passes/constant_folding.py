"""Constant folding: nodes whose inputs are all constants become initializers.

Real models often compute weights at run time (the onnx `light` models build
every weight with ``ConstantOfShape``); folding them before placement lets
every backend see constant weights (an NPU compiles them into its program) and
saves recomputing them on every run.  Nodes are evaluated by an existing
backend (the embedded NumPy one), through the ordinary backend contract.
"""
from __future__ import annotations

import logging

import numpy as np

from nnrt_core.backend.base import Backend, CompileOptions
from nnrt_core.errors import NnrtError
from nnrt_core.ir import Graph, Node
from nnrt_core.ir.clone import extract_subgraph

__all__ = ["fold_constants", "NONDETERMINISTIC_OPS", "QDQ_OPS"]

log = logging.getLogger("nnrt.passes")

#: ops whose outputs must not be frozen even with constant inputs
NONDETERMINISTIC_OPS = frozenset({
    "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli",
})

#: kept even with constant inputs (as ONNX Runtime does): int8 backends recognise
#: DequantizeLinear -> op -> QuantizeLinear patterns on weights
QDQ_OPS = frozenset({"DequantizeLinear", "QuantizeLinear"})


def _foldable(node: Node) -> bool:
    if node.op_type in NONDETERMINISTIC_OPS or node.op_type in QDQ_OPS or node.subgraphs() or node.domain not in ("", "ai.onnx"):
        return False
    if any(not v.name for v in node.outputs):
        return False
    return all(v is None or (v.const is not None and v.producer is None) for v in node.inputs)


def fold_constants(graph: Graph, evaluator: Backend) -> int:
    """Fold every foldable node of ``graph`` (in order, so chains fold too).

    Returns the number of nodes folded.  A node the evaluator cannot run is
    left in place.
    """
    folded = 0
    options = CompileOptions()
    for node in list(graph.nodes):
        if not _foldable(node):
            continue
        try:
            sub = extract_subgraph(graph, [node], [], node.outputs, name=f"fold_{node.name}")
            if evaluator.capability(sub, options).rejected:
                continue
            results = evaluator.compile(sub, options).run({})
        except NnrtError as e:
            log.info("constant folding skipped %s (%s): %s", node.name, node.op_type, e)
            continue
        values = [results[v.name] for v in node.outputs]
        if not all(isinstance(x, np.ndarray) for x in values):
            continue
        for i, v in enumerate(node.inputs):
            if v is not None:
                v.uses = [(n, j) for n, j in v.uses if not (n is node and j == i)]
        graph.nodes.remove(node)
        node.graph = None
        for v, x in zip(node.outputs, values):
            v.producer, v.output_index = None, -1
            v.const = x
            graph.initializers[v.name] = v
        folded += 1
    # drop initializers nothing reads any more (e.g. the shape inputs of folded nodes)
    outputs = {id(v) for v in graph.outputs}
    readers = {id(v) for n in graph.nodes for v in n.all_inputs()}
    for name, v in list(graph.initializers.items()):
        if id(v) not in readers and id(v) not in outputs:
            del graph.initializers[name]
    return folded
