"""ONNX shape inference during a build reads types, not the large weights:
``infer_static_types`` exports initializers above ``DATA_LIMIT`` elements as
typed inputs without serializing their data (a specialized MiniLM build spent
~0.1 s writing weights that inference never read)."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h

from nnrt_core.compiler.load import load_model
from nnrt_core.frontends.onnx import export, shapes


def _model(rows: int):
    w = h.make_tensor("w", T.FLOAT, [rows, 8], np.ones(rows * 8, np.float32).tolist())
    shape = h.make_tensor("shape", T.INT64, [2], [-1, 4])
    g = h.make_graph(
        [h.make_node("Gather", ["w", "ids"], ["e"], name="embed"),
         h.make_node("Reshape", ["e", "shape"], ["y"], name="reshape")],
        "embed", [h.make_tensor_value_info("ids", T.INT64, ["N"])],
        [h.make_tensor_value_info("y", T.FLOAT, ["A", "B"])], [w, shape])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def test_large_initializers_are_not_serialized_for_shape_inference(monkeypatch):
    graph = load_model(_model(1000)).graph  # w: 8000 elements > DATA_LIMIT
    written: list[int] = []
    real = export.array_to_tensor

    def spy(arr, name):
        written.append(arr.size)
        return real(arr, name)

    monkeypatch.setattr(export, "array_to_tensor", spy)
    types = shapes.infer_static_types(graph, {"ids": (3,)})
    assert types["e"].shape == (3, 8) and types["y"].shape == (6, 4)  # the small Reshape target still has its data
    assert written and max(written) <= shapes.DATA_LIMIT
