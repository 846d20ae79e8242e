"""Small models for the Ray tests (tests/test_ray*.py)."""
from __future__ import annotations

import numpy as np

from nnrt_core import GraphBuilder
from nnrt_core.frontends.onnx import to_onnx

__all__ = ["image_model", "two_input_model", "onnx_bytes"]


def image_model(batch: int | str = "N", seed: int = 0):
    """x [batch, 3, 8, 8] float32 -> Conv 3x3 (4 channels) -> Relu -> global average pool -> y [batch, 4]."""
    rs = np.random.RandomState(seed)
    b = GraphBuilder("img")
    x = b.input("x", "float32", [batch, 3, 8, 8])
    w = rs.randn(4, 3, 3, 3).astype(np.float32)
    bias = rs.rand(4).astype(np.float32)
    b.output(b.flatten(b.global_average_pool(b.relu(b.conv(x, w, bias, pads=[1, 1, 1, 1])))), "y")
    return b.build()


def two_input_model(seed: int = 0):
    """a [N, 4] float32, k [N, 4] float32 -> s = relu(a @ W) + k [N, 4]."""
    rs = np.random.RandomState(seed)
    b = GraphBuilder("two")
    a = b.input("a", "float32", ["N", 4])
    k = b.input("k", "float32", ["N", 4])
    b.output(b.relu(a @ rs.rand(4, 4).astype(np.float32)) + k, "s")
    return b.build()


def onnx_bytes(model) -> bytes:
    return to_onnx(model).SerializeToString()
