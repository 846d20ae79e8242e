"""float32 ``Sigmoid`` exported as ``1 / (1 + exp(-x))`` for ONNX Runtime.

ORT's CPU ``Sigmoid`` (onnxruntime 1.32) is a polynomial with about 1e-7
*absolute* error: 8e-4 relative error at x = -8.9, and several times the
true value below x = -9 (``benchmarks/bench_ort_sigmoid.py``).  A model
whose output is a small probability (a wake-word score of 3e-8, a presence
score of 6e-5) then differs from LiteRT, the NumPy backend or float64 far
beyond fp32 noise.  ``Neg -> Exp -> Add(1) -> Reciprocal`` in ORT stays
within 1.5e-7 relative error over [-30, 30] (``exp`` overflowing to ``inf``
gives 0, the limit).  Only top-level float32 ``Sigmoid`` nodes of a
partition are rewritten; other types keep ORT's kernel.
"""
from __future__ import annotations

import numpy as np

from nnrt_core.frontends.onnx import proto_build as helper
from nnrt_core.frontends.onnx.onnx_lite import P
from nnrt_core.ir import DataType, Graph, TensorType

__all__ = ["exact_sigmoids"]


def _float32_sigmoids(graph: Graph) -> set[str]:
    """Output names of the graph's float32 ``Sigmoid`` nodes (default domain)."""
    out = set()
    for n in graph.nodes:
        if n.op_type == "Sigmoid" and n.domain in ("", "ai.onnx") and n.inputs and n.inputs[0] is not None:
            t = n.inputs[0].type
            if isinstance(t, TensorType) and t.dtype == DataType.FLOAT and n.outputs[0].name:
                out.add(n.outputs[0].name)
    return out


def exact_sigmoids(model: P.ModelProto, graph: Graph) -> int:
    """Rewrite ``model``'s float32 ``Sigmoid`` nodes (those of ``graph``, the
    IR it was exported from) in place; returns how many were rewritten."""
    targets = _float32_sigmoids(graph)
    if not targets:
        return 0
    g = model.graph
    taken = {name for node in g.node for name in (*node.input, *node.output)}
    taken.update(t.name for t in g.initializer)
    taken.update(v.name for v in g.input)

    def fresh(base: str) -> str:
        name, k = base, 0
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name)
        return name

    one = fresh("nnrt_sigmoid_one")
    nodes, count = [], 0
    for node in g.node:
        if node.op_type != "Sigmoid" or node.domain not in ("", "ai.onnx") or node.output[0] not in targets:
            nodes.append(node)
            continue
        x, y, base = node.input[0], node.output[0], node.name or node.output[0]
        neg, exp, den = fresh(y + "__neg"), fresh(y + "__exp"), fresh(y + "__den")
        nodes += [helper.make_node("Neg", [x], [neg], name=fresh(base + "__neg")),
                  helper.make_node("Exp", [neg], [exp], name=fresh(base + "__exp")),
                  helper.make_node("Add", [exp, one], [den], name=fresh(base + "__add")),
                  helper.make_node("Reciprocal", [den], [y], name=fresh(base + "__rcp"))]
        count += 1
    del g.node[:]
    g.node.extend(nodes)
    g.initializer.append(helper.from_array(np.array(1.0, np.float32), one))
    return count
