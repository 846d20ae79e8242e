"""Graph passes run before placement."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from conftest import make_registry
from fakes import fake_plugin, make_fake_backend
from nnrt_core import ScheduleConfig, Session
from nnrt_core.frontends import load_onnx
from nnrt_core.passes import fold_constants
from nnrt_core.registry import default_registry


def weight_model():
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [2, 3])
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["w0"], name="make_w",
                         value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
        helper.make_node("Mul", ["w0", "w0"], ["w"], name="square_w"),
        helper.make_node("RandomNormal", [], ["noise"], name="noise", shape=[2, 3], seed=1.0),
        helper.make_node("Add", ["x", "w"], ["a"], name="add_w"),
        helper.make_node("Mul", ["noise", "a"], ["y"], name="mul_noise"),
    ]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [shape])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_fold_constants_folds_chains_but_not_random_ops():
    g = load_onnx(weight_model()).graph
    n = fold_constants(g, default_registry().backend("numpy").backend)
    assert n == 2
    assert [x.name for x in g.nodes] == ["noise", "add_w", "mul_noise"]
    np.testing.assert_array_equal(g.initializers["w"].const, np.full((2, 3), 0.25, np.float32))
    assert "shape" not in g.initializers and "w0" not in g.initializers  # no longer read
    g.validate()


def test_session_folds_by_default_and_not_at_level_none():
    npu = make_fake_backend("npu", ["Add", "Mul", "RandomNormal"], priority=100)
    reg = make_registry(fake_plugin(npu))
    x = {"x": np.ones((2, 3), np.float32)}
    folded = Session(weight_model(), ScheduleConfig(backends=["npu"]), registry=reg)
    plain = Session(weight_model(), ScheduleConfig(backends=["npu"], optimization_level="none"), registry=reg)
    assert folded.folded_nodes == 2 and plain.folded_nodes == 0
    assert len(folded.placement) == 3 and len(plain.placement) == 5
    assert plain.placement["make_w"] == "numpy"  # the fake npu has no ConstantOfShape
    np.testing.assert_allclose(folded.run(x)["y"], plain.run(x)["y"], rtol=1e-6)


def test_ir_model_given_to_session_is_not_mutated():
    model = load_onnx(weight_model())
    before = [n.name for n in model.graph.nodes]
    Session(model, ScheduleConfig(backends=["numpy"]))
    assert [n.name for n in model.graph.nodes] == before
