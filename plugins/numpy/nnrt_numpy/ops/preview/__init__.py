"""Operator kernels: ai.onnx.preview (operators still in preview in the ONNX standard).

Each op module registers its kernels when imported; ``nnrt_numpy.op_index``
names the module of every op, imported when a node first needs it.
"""
from __future__ import annotations
