"""Two ONNX Runtime float32 kernels replaced by exact equivalents at export.

- ``Sigmoid``: ORT's CPU kernel (onnxruntime 1.32) is a polynomial with about
  1e-7 *absolute* error: 8e-4 relative error at x = -8.9, and several times
  the true value below x = -9 (``benchmarks/bench_ort_precise.py``).  A
  model whose output is a small probability (a wake-word score of 3e-8, a
  presence score of 6e-5) then differs from LiteRT, the NumPy backend and
  float64 far beyond fp32 noise.  ``Neg -> Exp -> Add(1) -> Reciprocal``
  stays within 1.5e-7 relative error over [-30, 30] (``exp`` overflowing to
  ``inf`` gives 0, the limit).
- **Global average pooling** (``GlobalAveragePool``, or an ``AveragePool``
  whose one unpadded window is the whole image): ORT sums the window
  sequentially in fp32, 1.6e-6 relative error on a 64x64 window of
  ``selfie_segmentation``; ``ReduceMean`` over the spatial axes gives 1.5e-7.

Only top-level float32 nodes of a partition are rewritten (same outputs, same
names); everything else keeps ORT's kernels.
"""
from __future__ import annotations

import numpy as np

from nnrt_core.plugin_api import proto_build as helper
from nnrt_core.plugin_api import P
from nnrt_core.ir import DataType, Graph, Node, TensorType

__all__ = ["precise_kernels"]


def _float32_input(n: Node) -> TensorType | None:
    v = n.inputs[0] if n.inputs else None
    t = v.type if v is not None else None
    return t if isinstance(t, TensorType) and t.dtype == DataType.FLOAT else None


def _global_pool_axes(n: Node) -> list[int] | None:
    """The spatial axes a float32 global average pool reduces, else ``None``."""
    t = _float32_input(n)
    if t is None or t.shape is None or len(t.shape) < 3:
        return None
    spatial = list(t.shape[2:])
    if n.op_type == "AveragePool":
        if not all(isinstance(d, int) for d in spatial) or n.attr("auto_pad", "NOTSET") not in ("NOTSET", b"NOTSET"):
            return None
        if list(n.attr("kernel_shape", [])) != spatial or any(n.attr("pads", []) or []) or \
                any(d != 1 for d in (n.attr("dilations", []) or [])) or n.attr("ceil_mode", 0):
            return None
    return list(range(2, len(t.shape)))


def _targets(graph: Graph) -> dict[str, tuple[str, list[int] | None]]:
    """Output name -> (kind, axes) of the graph's nodes to rewrite."""
    out: dict[str, tuple[str, list[int] | None]] = {}
    for n in graph.nodes:
        if n.domain not in ("", "ai.onnx") or not n.outputs or not n.outputs[0].name:
            continue
        if n.op_type == "Sigmoid" and _float32_input(n) is not None:
            out[n.outputs[0].name] = ("sigmoid", None)
        elif n.op_type in ("AveragePool", "GlobalAveragePool"):
            axes = _global_pool_axes(n)
            if axes is not None:
                out[n.outputs[0].name] = ("mean", axes)
    return out


def precise_kernels(model: P.ModelProto, graph: Graph) -> int:
    """Rewrite ``model``'s float32 ``Sigmoid`` and global average pools (the
    nodes of ``graph``, the IR it was exported from) in place; returns how many."""
    targets = _targets(graph)
    g = model.graph
    if not targets:
        return 0
    taken = {name for node in g.node for name in (*node.input, *node.output, node.name)}
    taken.update(t.name for t in g.initializer)
    taken.update(v.name for v in g.input)

    def fresh(base: str) -> str:
        name, k = base, 0
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name)
        return name

    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 18)
    consts: dict[str, str] = {}

    def const(key: str, array: np.ndarray) -> str:
        if key not in consts:
            consts[key] = fresh(f"nnrt_precise_{key}")
            g.initializer.append(helper.from_array(array, consts[key]))
        return consts[key]

    nodes, count = [], 0
    for node in g.node:
        kind, axes = targets.get(node.output[0], (None, None)) if node.output else (None, None)
        if kind is None or node.domain not in ("", "ai.onnx") or node.op_type not in ("Sigmoid", "AveragePool",
                                                                                        "GlobalAveragePool"):
            nodes.append(node)
            continue
        x, y, base = node.input[0], node.output[0], node.name or node.output[0]
        count += 1
        if kind == "sigmoid":
            one = const("one", np.array(1.0, np.float32))
            neg, exp, den = fresh(y + "__neg"), fresh(y + "__exp"), fresh(y + "__den")
            nodes += [helper.make_node("Neg", [x], [neg], name=fresh(base + "__neg")),
                      helper.make_node("Exp", [neg], [exp], name=fresh(base + "__exp")),
                      helper.make_node("Add", [exp, one], [den], name=fresh(base + "__add")),
                      helper.make_node("Reciprocal", [den], [y], name=fresh(base + "__rcp"))]
        elif opset >= 18:
            ax = const("axes" + "_".join(map(str, axes)), np.array(axes, np.int64))
            nodes.append(helper.make_node("ReduceMean", [x, ax], [y], name=fresh(base + "__mean"), keepdims=1))
        else:
            nodes.append(helper.make_node("ReduceMean", [x], [y], name=fresh(base + "__mean"), keepdims=1,
                                          axes=axes))
    del g.node[:]
    g.node.extend(nodes)
    return count
