"""The NumPy backend dequantizes constant weights once, at compile
(nnrt_numpy/weight_dq.py): same numbers as ONNX Runtime, activations' Q/DQ still per run."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from nnrt_core import load_model
import nnrt_numpy.backend  # noqa: F401  (registers the kernels)
from nnrt_numpy.program import GraphProgram

RNG = np.random.default_rng(0)


def qdq_matmul_model(per_axis: bool):
    """x -> Q -> DQ -> MatMul(DQ(int8 weight)) -> y: one weight DQ, one activation DQ."""
    w = RNG.integers(-127, 128, size=(16, 8), dtype=np.int8)
    w_scale = (RNG.random(8, dtype=np.float32) * 0.02 + 0.01) if per_axis else np.float32(0.015)
    w_zp = np.zeros(8, np.int8) if per_axis else np.int8(0)
    inits = [numpy_helper.from_array(w, "w_q"), numpy_helper.from_array(np.asarray(w_scale, np.float32), "w_s"),
             numpy_helper.from_array(np.asarray(w_zp), "w_zp"),
             numpy_helper.from_array(np.float32(0.02), "x_s"), numpy_helper.from_array(np.int8(3), "x_zp")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_s", "x_zp"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "x_s", "x_zp"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w_q", "w_s", "w_zp"], ["w"], axis=1),
             helper.make_node("MatMul", ["xd", "w"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    m.ir_version = 9
    return m


def test_weight_dequantize_is_folded_at_compile_and_matches_ort():
    for per_axis in (False, True):
        m = qdq_matmul_model(per_axis)
        prog = GraphProgram(load_model(m).graph)
        assert prog.folded_weights == 1  # the weight's DQ; the activation's stays a step
        assert [st.node.op_type for st in prog.steps].count("DequantizeLinear") == 1
        x = RNG.standard_normal((4, 16)).astype(np.float32)
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        for _ in range(2):  # the folded constant is not changed by a run
            got = prog.run([x])[0]
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_dequantize_of_a_graph_input_is_not_folded():
    g = helper.make_graph([helper.make_node("DequantizeLinear", ["q", "s"], ["y"])], "g",
                          [helper.make_tensor_value_info("q", TensorProto.INT8, [5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5])],
                          [numpy_helper.from_array(np.float32(0.5), "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    m.ir_version = 9
    prog = GraphProgram(load_model(m).graph)
    assert prog.folded_weights == 0
    q = np.arange(-2, 3, dtype=np.int8)
    np.testing.assert_array_equal(prog.run([q])[0], q.astype(np.float32) * 0.5)


def test_dequantize_of_a_weight_that_is_a_graph_output_is_not_folded():
    """The caller gets a fresh, writable array, and changing it changes no later run."""
    g = helper.make_graph([helper.make_node("DequantizeLinear", ["q", "s"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
                          [numpy_helper.from_array(np.array([1, 2, 3], np.int8), "q"),
                           numpy_helper.from_array(np.float32(0.5), "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    m.ir_version = 9
    prog = GraphProgram(load_model(m).graph)
    assert prog.folded_weights == 0
    first = prog.run([])[0]
    first[0] = 7.0
    np.testing.assert_array_equal(prog.run([])[0], [0.5, 1.0, 1.5])
