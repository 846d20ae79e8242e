"""Informative weights for the onnx wheel's ``light`` models, whose weights
are ConstantOfShape fills (every logit equal): shared by the NPU tests and
``benchmarks/bench_npu_int8.py``."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper as nh

__all__ = ["he_initialized"]


def he_initialized(m: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """``m`` (changed in place and returned) with every ConstantOfShape weight
    replaced by a random He-scaled initializer (rank-1 ones uniform in [0, 0.1))."""
    rs = np.random.RandomState(seed)
    shapes = {t.name: nh.to_array(t) for t in m.graph.initializer}
    keep, new_inits = [], []
    for n in m.graph.node:
        if n.op_type == "ConstantOfShape" and n.input[0] in shapes:
            shape = [int(s) for s in shapes[n.input[0]]]
            if len(shape) > 1:
                arr = rs.randn(*shape) * np.sqrt(2.0 / max(int(np.prod(shape[1:])), 1))
            else:
                arr = rs.rand(*shape) * 0.1
            new_inits.append(nh.from_array(arr.astype(np.float32), n.output[0]))
        else:
            keep.append(n)
    del m.graph.node[:]
    m.graph.node.extend(keep)
    used = {i for n in keep for i in n.input}
    inits = [t for t in m.graph.initializer if t.name in used] + new_inits
    del m.graph.initializer[:]
    m.graph.initializer.extend(inits)
    names = {t.name for t in inits}
    graph_inputs = [i for i in m.graph.input if i.name not in names and i.name not in shapes]
    del m.graph.input[:]
    m.graph.input.extend(graph_inputs)
    m.ir_version = 8
    return m
