"""Operator kernels: ai.onnx.preview.training optimizers (one update step each).

Each op module registers its kernels when imported; ``nnrt_numpy.op_index``
names the module of every op, imported when a node first needs it.
"""
from __future__ import annotations
