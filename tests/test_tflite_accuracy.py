"""Accuracy fixes found on real TFLite models (issue #18), each on a small model
written in code: outputs are compared *relative to their own magnitude*, so tiny
probabilities (a wake-word score of 3e-8) count as much as large ones."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite")
pytest.importorskip("ai_edge_litert")

from tflite_models import TFLiteWriter, litert_run  # noqa: E402

from nnrt_core import ScheduleConfig, Session  # noqa: E402

F32 = np.float32


def _logistic_model(shape: list[int]) -> bytes:
    w = TFLiteWriter()
    x = w.input("x", shape)
    y = w.tensor("y", shape)
    w.op("LOGISTIC", [x], [y])
    w.outputs = [y]
    return w.build()


@pytest.mark.parametrize("backend", ["numpy", "onnxruntime"])
def test_logistic_of_very_negative_logits_is_relatively_exact(backend):
    """ORT's own Sigmoid has ~1e-7 absolute error (8e-4 relative at x = -8.9, several
    times the value below -9); the ORT backend exports 1 / (1 + exp(-x)) instead."""
    x = np.linspace(-25, -6, 4 * 97, dtype=F32).reshape(4, 97)
    model = _logistic_model([4, 97])
    (ref,) = litert_run(model, [x])
    sess = Session(model, ScheduleConfig(backends=[backend]))
    assert {p.backend for p in sess.placement_report} == {backend}
    got = sess.run({"x": x})["y"].astype(np.float64)
    exact = 1 / (1 + np.exp(-x.astype(np.float64)))
    assert np.abs(got - exact).max() / exact.max() <= 1e-6
    assert (np.abs(got - exact) / exact).max() <= 1e-6  # each value, however small
    assert np.abs(got - ref).max() / np.abs(ref).max() <= 1e-6


def test_exact_sigmoids_rewrites_only_float32_sigmoid():
    from nnrt_core.frontends.onnx import to_onnx
    from nnrt_core.ir import DataType, Graph, Node, TensorType, Value
    from nnrt_onnxruntime.exact_sigmoid import exact_sigmoids

    g = Graph("g", opset_imports={"": 18})
    a = Value("a", TensorType(DataType.FLOAT, (3,)))
    b = Value("b", TensorType(DataType.DOUBLE, (3,)))
    ya, yb = Value("ya", TensorType(DataType.FLOAT, (3,))), Value("yb", TensorType(DataType.DOUBLE, (3,)))
    g.inputs = [a, b]
    g.add_node(Node("Sigmoid", [a], [ya], name="s1"))
    g.add_node(Node("Sigmoid", [b], [yb], name="s2"))
    g.outputs = [ya, yb]
    model = to_onnx(g)
    assert exact_sigmoids(model, g) == 1
    assert [n.op_type for n in model.graph.node] == ["Neg", "Exp", "Add", "Reciprocal", "Sigmoid"]
    assert model.graph.node[3].output[0] == "ya"
    import onnxruntime as ort

    xa, xb = np.array([-20, 0, 20], F32), np.array([-20, 0, 20], np.float64)
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got, _ = s.run(None, {"a": xa, "b": xb})
    exact = 1 / (1 + np.exp(-xa.astype(np.float64)))
    assert (np.abs(got - exact) / exact).max() <= 1e-6
