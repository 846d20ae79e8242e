"""The ``qdq_cleanup`` pass: Q(DQ(q)) round trips removed, data-movement ops
moved to the integers, clamps the quantizer applies dropped.  Every rewrite
must leave the outputs bit-identical (checked against optimization level
``none`` on NumPy and ONNX Runtime), and must not fire where it would change
them (different parameters, per-axis parameters, a clamp Q does not apply)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core import ScheduleConfig, Session
from nnrt_core.frontends import load_onnx
from nnrt_core.passes import PassManager, QdqCleanup

S, Z = 0.05, -128  #: the shared parameters of the test graphs
INT8 = TensorProto.INT8


def _qparams(prefix: str, scale: float, zp: int, dtype=np.int8) -> list:
    return [numpy_helper.from_array(np.array(scale, np.float32), f"{prefix}_s"),
            numpy_helper.from_array(np.array(zp, dtype), f"{prefix}_z")]


def _model(nodes, inputs, outputs, inits, opset=17):
    g = helper.make_graph(nodes, "qdq", inputs, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def q(x, y, p="a"):
    return helper.make_node("QuantizeLinear", [x, f"{p}_s", f"{p}_z"], [y], name=f"q_{y}")


def dq(x, y, p="a"):
    return helper.make_node("DequantizeLinear", [x, f"{p}_s", f"{p}_z"], [y], name=f"dq_{y}")


def movement_model(second: str = "a"):
    """float x -> Q -> DQ -> Reshape -> Q -> DQ -> Transpose -> Q -> DQ -> Slice -> Q, Concat with a
    second int8 input (parameters ``second``) -> Q -> DQ -> Q: an int8 output, a float output."""
    inits = _qparams("a", S, Z) + _qparams("b", S * 2, Z) + [
        numpy_helper.from_array(np.array([2, 12, 4], np.int64), "shape"),
        numpy_helper.from_array(np.array([1], np.int64), "st"), numpy_helper.from_array(np.array([4], np.int64), "en"),
        numpy_helper.from_array(np.array([1], np.int64), "ax")]
    nodes = [q("x", "xq"), dq("xq", "xd"),
             helper.make_node("Reshape", ["xd", "shape"], ["r"], name="reshape"), q("r", "rq"), dq("rq", "rd"),
             helper.make_node("Transpose", ["rd"], ["t"], name="transpose", perm=[0, 2, 1]), q("t", "tq"),
             dq("tq", "td"), helper.make_node("Slice", ["td", "st", "en", "ax"], ["s"], name="slice"), q("s", "sq"),
             dq("sq", "sd"), dq("h", "hd", second),
             helper.make_node("Concat", ["sd", "hd"], ["c"], name="concat", axis=1), q("c", "cq"), dq("cq", "cd"),
             q("cd", "out"), helper.make_node("Sigmoid", ["cd"], ["f"], name="sigmoid")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 8]),
                          helper.make_tensor_value_info("h", INT8, [2, 3, 12])],
                  [helper.make_tensor_value_info("out", INT8, [2, 6, 12]),
                   helper.make_tensor_value_info("f", TensorProto.FLOAT, [2, 6, 12])], inits)


def clamp_model(act: str, zp: int, lo: float = 0.0, hi: float = 6.0, scale: float = 6.0 / 255):
    """x -> Conv -> act (Relu, or Clip(lo, hi)) -> Q (scale, zp) -> DQ -> y."""
    rng = np.random.default_rng(0)
    inits = _qparams("a", scale, zp) + [
        numpy_helper.from_array(rng.normal(0, 1, (4, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(np.array(lo, np.float32), "lo"), numpy_helper.from_array(np.array(hi, np.float32), "hi")]
    extra = ["lo", "hi"] if act == "Clip" else []
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node(act, ["c", *extra], ["r"], name="act"), q("r", "rq"), dq("rq", "y")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], inits)


def _run(model, level: str, backend: str, feeds):
    sess = Session(model.SerializeToString(), ScheduleConfig(backends=[backend], optimization_level=level))
    return sess, sess.run(feeds)


def _assert_same(model, feeds, backend):
    """The default level's outputs are the bit-identical outputs of level none; returns both sessions."""
    plain, want = _run(model, "none", backend, feeds)
    lean, got = _run(model, "basic", backend, feeds)
    assert list(got) == list(want)
    for k in want:
        assert got[k].dtype == want[k].dtype and np.array_equal(got[k], want[k]), k
    return plain, lean


def _ops(sess) -> list[str]:
    return [n.op_type for n in sess.graph.nodes]


def _feeds(seed: int = 1):
    rng = np.random.default_rng(seed)
    return {"x": rng.uniform(-4, 8, (2, 6, 8)).astype(np.float32),
            "h": rng.integers(-128, 128, (2, 3, 12)).astype(np.int8)}


@pytest.mark.parametrize("backend", ["numpy", "onnxruntime"])
def test_movement_ops_run_on_the_integers_with_the_same_outputs(backend):
    plain, lean = _assert_same(movement_model(), _feeds(), backend)
    before, after = _ops(plain), _ops(lean)
    assert len(before) == 17 and len(after) < len(before)
    # Reshape, Transpose, Slice and Concat read int8 now; left: the float input's Q, the DQ the Sigmoid reads and
    # the Q of the int8 output (its name stays, and what it re-quantizes is read by that DQ too)
    assert after.count("QuantizeLinear") == 2 and after.count("DequantizeLinear") == 1, after
    for n in lean.graph.nodes:
        if n.op_type in ("Reshape", "Transpose", "Slice", "Concat"):
            assert n.outputs[0].dtype.name == "INT8", n


def test_concat_of_other_parameters_stays_float():
    plain, lean = _assert_same(movement_model(second="b"), _feeds(2), "numpy")
    concat = next(n for n in lean.graph.nodes if n.op_type == "Concat")
    assert concat.outputs[0].dtype.name == "FLOAT"  # its inputs are dequantized with two scales
    assert _ops(lean).count("DequantizeLinear") >= 3


def test_round_trip_into_a_graph_output_keeps_its_name():
    inits = _qparams("a", S, Z)
    m = _model([q("x", "xq"), dq("xq", "xd"), q("xd", "out")],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
               [helper.make_tensor_value_info("out", INT8, [3, 5])], inits)
    feeds = {"x": np.random.default_rng(0).uniform(-10, 10, (3, 5)).astype(np.float32)}
    plain, lean = _assert_same(m, feeds, "numpy")
    assert _ops(lean) == ["QuantizeLinear"] and [v.name for v in lean.graph.outputs] == ["out"]


@pytest.mark.parametrize("act,zp,lo,hi,dropped", [
    ("Relu", -128, 0, 0, True),       # zero point at int8's minimum: Q clamps at 0 already
    ("Relu", -100, 0, 0, False),      # negative values still quantize above the minimum
    ("Clip", -128, 0.0, 6.0, True),   # ReLU6 with the range [0, 6]: scale 6/255
    ("Clip", -128, 0.0, 3.0, False),  # clipped inside the quantized range
    ("Clip", -128, -1.0, 6.0, True),  # a lower bound below the quantized range is free too
    ("Clip", -100, -0.3, 9.0, False),  # ... one inside it is not (the range starts at -28 * 6/255)
])
def test_a_clamp_goes_only_where_the_quantizer_applies_it(act, zp, lo, hi, dropped):
    m = clamp_model(act, zp, lo, hi)
    feeds = {"x": np.random.default_rng(3).normal(0, 3, (1, 3, 8, 8)).astype(np.float32)}
    for backend in ("numpy", "onnxruntime"):
        _, lean = _assert_same(m, feeds, backend)
        assert (act not in _ops(lean)) == dropped, _ops(lean)


def test_per_axis_parameters_are_left_alone():
    inits = [numpy_helper.from_array(np.array([0.1, 0.2, 0.3], np.float32), "a_s"),
             numpy_helper.from_array(np.zeros(3, np.int8), "a_z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "a_s", "a_z"], ["xq"], axis=0),
             helper.make_node("DequantizeLinear", ["xq", "a_s", "a_z"], ["xd"], axis=0),
             helper.make_node("QuantizeLinear", ["xd", "a_s", "a_z"], ["out"], axis=0)]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
               [helper.make_tensor_value_info("out", INT8, [3, 4])], inits)
    graph = load_onnx(m).graph
    report = PassManager(passes=[QdqCleanup()]).run(graph)
    assert report.passes["qdq_cleanup"].rewrites == 0 and len(graph.nodes) == 3


def test_the_pass_reports_its_rewrites():
    graph = load_onnx(movement_model()).graph
    report = PassManager(passes=[QdqCleanup()]).run(graph)
    summary = report.passes["qdq_cleanup"]
    assert summary.rewrites == 4 and any("runs on the integers" in n for n in summary.notes)
