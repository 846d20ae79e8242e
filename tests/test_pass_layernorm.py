"""The ``layernorm_fusion`` pass: a written-out last-axis layer norm (TFLite's RSQRT form, or Pow/Div) becomes
one LayerNormalization, fewer nodes, the same outputs to float32 rounding (a large mean included); it is not
made where the pattern is not a last-axis layer norm."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core import ScheduleConfig, Session

C = 16


def ln_model(form: str = "rsqrt", affine: bool = True, axis: int = -1, opset: int = 18, extra_reader: bool = False):
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(np.array([axis], np.int64), "axes"),
             numpy_helper.from_array(np.array(1e-5, np.float32), "eps"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two"),
             numpy_helper.from_array(rng.uniform(0.5, 2, C).astype(np.float32), "gamma"),
             numpy_helper.from_array(rng.normal(0, 1, C).astype(np.float32), "beta")]

    def mean(x, y):
        if opset >= 18:
            return helper.make_node("ReduceMean", [x, "axes"], [y], keepdims=1)
        return helper.make_node("ReduceMean", [x], [y], keepdims=1, axes=[axis])
    nodes = [mean("x", "m"), helper.make_node("Sub", ["x", "m"], ["d"]),
             helper.make_node("Pow", ["d", "two"], ["sq"]) if form == "div" else helper.make_node("Mul", ["d", "d"], ["sq"]),
             mean("sq", "v"), helper.make_node("Add", ["v", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["s"])]
    if form == "div":
        nodes.append(helper.make_node("Div", ["d", "s"], ["n"]))
    else:
        nodes += [helper.make_node("Reciprocal", ["s"], ["r"]), helper.make_node("Mul", ["d", "r"], ["n"])]
    out = "n"
    if affine:
        nodes += [helper.make_node("Mul", ["n", "gamma"], ["g"]), helper.make_node("Add", ["g", "beta"], ["y"])]
        out = "y"
    outputs = [helper.make_tensor_value_info(out, TensorProto.FLOAT, [3, 5, C])]
    if extra_reader:
        nodes.append(helper.make_node("Neg", ["d"], ["nd"]))
        outputs.append(helper.make_tensor_value_info("nd", TensorProto.FLOAT, [3, 5, C]))
    g = helper.make_graph(nodes, "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5, C])], outputs,
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _sessions(model, backend):
    data = model.SerializeToString()
    return (Session(data, ScheduleConfig(backends=[backend], optimization_level="none")),
            Session(data, ScheduleConfig(backends=[backend])))


@pytest.mark.parametrize("backend", ["numpy", "onnxruntime"])
@pytest.mark.parametrize("form,affine", [("rsqrt", True), ("div", False)])
def test_a_written_out_layer_norm_becomes_one_node(backend, form, affine):
    plain, fused = _sessions(ln_model(form, affine), backend)
    assert [n.op_type for n in fused.graph.nodes] == ["LayerNormalization"]
    assert len(plain.graph.nodes) == {"rsqrt": 8, "div": 7}[form] + 2 * affine
    rng = np.random.default_rng(2)
    for mean in (0.0, 300.0):  # a large mean: the centred variance keeps its precision
        x = (mean + rng.normal(0, 1, (3, 5, C))).astype(np.float32)
        want, got = list(plain.run({"x": x}).values())[0], list(fused.run({"x": x}).values())[0]
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * float(np.abs(want).max()))


@pytest.mark.parametrize("kw", [{"axis": 1}, {"opset": 13}, {"extra_reader": True}])
def test_other_patterns_are_left_alone(kw):
    _, sess = _sessions(ln_model(**kw), "numpy")
    assert "LayerNormalization" not in [n.op_type for n in sess.graph.nodes]
    assert sess.pass_report.passes["layernorm_fusion"].rewrites == 0
