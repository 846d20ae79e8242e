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


def _pool_model(hw: int, kernel: int) -> bytes:
    """CONV_2D (1x1, identity weights) -> AVERAGE_POOL_2D: the pool reads an NCHW value, as in a network."""
    w = TFLiteWriter()
    x = w.input("x", [1, hw, hw, 3])
    c = w.tensor("c", [1, hw, hw, 3])
    w.op("CONV_2D", [x, w.const("w", np.eye(3, dtype=F32).reshape(3, 1, 1, 3)), w.const("b", np.zeros(3, F32))],
         [c], "Conv2DOptions", Padding=1, StrideW=1, StrideH=1)
    oh = hw // kernel
    y = w.tensor("y", [1, oh, oh, 3])
    w.op("AVERAGE_POOL_2D", [c], [y], "Pool2DOptions", Padding=1, StrideW=kernel, StrideH=kernel,
         FilterWidth=kernel, FilterHeight=kernel)
    w.outputs = [y]
    return w.build()


@pytest.mark.parametrize("backend", ["numpy", "onnxruntime"])
def test_global_average_pool_is_not_a_sequential_fp32_sum(backend):
    """ORT's AveragePool sums a 64x64 window sequentially in fp32 (~1.6e-6 relative error);
    the ORT backend exports a global average pool as ReduceMean (~1e-7)."""
    x = np.random.default_rng(4).uniform(0.5, 1.5, (1, 64, 64, 3)).astype(F32)
    model = _pool_model(64, 64)
    sess = Session(model, ScheduleConfig(backends=[backend]))
    assert {p.backend for p in sess.placement_report} == {backend}
    got = sess.run({"x": x})["y"].astype(np.float64)
    exact = x.astype(np.float64).mean(axis=(1, 2), keepdims=True)
    assert np.abs(got - exact).max() / np.abs(exact).max() <= 4e-7
    (ref,) = litert_run(model, [x])
    assert np.abs(got - ref).max() / np.abs(ref).max() <= 2e-6


def test_windowed_average_pool_keeps_averagepool():
    """Only a single whole-image window is a mean: a 2x2 pool is still AveragePool."""
    x = np.random.default_rng(5).uniform(-1, 1, (1, 8, 8, 3)).astype(F32)
    model = _pool_model(8, 2)
    (ref,) = litert_run(model, [x])
    got = Session(model, ScheduleConfig(backends=["onnxruntime"])).run({"x": x})["y"]
    assert np.abs(got - ref).max() <= 1e-6


def test_precise_kernels_rewrites_only_float32_sigmoid_and_global_pools():
    from nnrt_core.frontends.onnx import to_onnx
    from nnrt_core.ir import Attribute, AttrKind, DataType, Graph, Node, TensorType, Value
    from nnrt_onnxruntime.precise import precise_kernels

    g = Graph("g", opset_imports={"": 18})
    a = Value("a", TensorType(DataType.FLOAT, (3,)))
    b = Value("b", TensorType(DataType.DOUBLE, (3,)))
    ya, yb = Value("ya", TensorType(DataType.FLOAT, (3,))), Value("yb", TensorType(DataType.DOUBLE, (3,)))
    g.inputs = [a, b]
    g.add_node(Node("Sigmoid", [a], [ya], name="s1"))
    g.add_node(Node("Sigmoid", [b], [yb], name="s2"))
    p = Value("p", TensorType(DataType.FLOAT, (1, 2, 4, 4)))
    gp, wp = Value("gp", TensorType(DataType.FLOAT, (1, 2, 1, 1))), Value("wp", TensorType(DataType.FLOAT, (1, 2, 2, 2)))
    g.inputs.append(p)
    g.add_node(Node("GlobalAveragePool", [p], [gp], name="g1"))
    g.add_node(Node("AveragePool", [p], [wp], name="a1", attributes=[Attribute("kernel_shape", AttrKind.INTS, [2, 2]),
                                                                   Attribute("strides", AttrKind.INTS, [2, 2])]))
    g.outputs = [ya, yb, gp, wp]
    model = to_onnx(g)
    assert precise_kernels(model, g) == 2
    assert [n.op_type for n in model.graph.node] == ["Neg", "Exp", "Add", "Reciprocal", "Sigmoid", "ReduceMean",
                                                     "AveragePool"]
    assert model.graph.node[3].output[0] == "ya"
    import onnxruntime as ort

    xa, xb = np.array([-20, 0, 20], F32), np.array([-20, 0, 20], np.float64)
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    xp = np.arange(32, dtype=F32).reshape(1, 2, 4, 4)
    got, _, mean, _ = s.run(None, {"a": xa, "b": xb, "p": xp})
    assert np.allclose(mean, xp.mean(axis=(2, 3), keepdims=True))
    exact = 1 / (1 + np.exp(-xa.astype(np.float64)))
    assert (np.abs(got - exact) / exact).max() <= 1e-6
