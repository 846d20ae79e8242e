"""Dequantized weights computed once at compile.

A QDQ model keeps its weights as int8 behind ``DequantizeLinear`` so that an
int8 device can take the pattern; the core does not fold those nodes (see
``nnrt_core.passes.constant_folding``).  On the NumPy backend the float
weights are what the kernels read, and dequantizing every weight on every run
costs more than the convolutions of a large model (VGG-19: ~2/3 of a run).
The program therefore evaluates a ``DequantizeLinear`` whose inputs are all
constants once, at compile, and keeps the float result as a read-only
constant (memory: the float copy beside the int8 one, up to
:data:`MAX_FOLDED_BYTES` per tensor).
"""
from __future__ import annotations

from typing import AbstractSet, Any

import numpy as np

from nnrt_core.ir import Node

__all__ = ["MAX_FOLDED_BYTES", "fold_constant_dequantize"]

#: the largest float weight folded at compile (bytes); larger ones stay per-run
MAX_FOLDED_BYTES = 512 << 20


def fold_constant_dequantize(node: Node, kernel: Any, graph_outputs: AbstractSet[int]) -> np.ndarray | None:
    """The output of ``node`` computed once, when it is a ``DequantizeLinear``
    of constants (weights), else None.  Not for a graph output (``id`` in
    ``graph_outputs``): the caller gets a fresh, writable array there."""
    if node.op_type != "DequantizeLinear" or node.domain not in ("", "ai.onnx") or len(node.outputs) != 1:
        return None
    if id(node.outputs[0]) in graph_outputs:
        return None
    if not node.inputs or any(v is not None and v.const is None for v in node.inputs):
        return None
    x = node.inputs[0].const
    if np.asarray(x).size * 4 > MAX_FOLDED_BYTES:
        return None
    args = [v.const if v is not None else None for v in node.inputs]
    while args and args[-1] is None:
        args.pop()
    y = np.asarray(kernel(*args)[0])
    y.setflags(write=False)
    return y
