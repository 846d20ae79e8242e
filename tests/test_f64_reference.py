"""benchmarks/f64_reference.py: a real model widened to float64 on the NumPy
backend, the reference real_models.py --f64 uses to tell ORT's own fp32
rounding from an nnrt error."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from f64_reference import float64_copy, float64_steps, worst_vs  # noqa: E402


def model(tmp_path: Path) -> Path:
    """y = Cast<float>(x * 0.1 + c) with a Constant attribute and an If whose branch adds a float initializer."""
    then = helper.make_graph([helper.make_node("Add", ["s", "one"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
                             [numpy_helper.from_array(np.array(1e-3, np.float32), "one")])
    other = helper.make_graph([helper.make_node("Identity", ["s"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(1 / 3, np.float32))),
             helper.make_node("Mul", ["x", "k"], ["m"]), helper.make_node("Add", ["m", "c"], ["s"]),
             helper.make_node("If", ["flag"], ["u"], then_branch=then, else_branch=other),
             helper.make_node("Cast", ["u"], ["y"], to=TensorProto.FLOAT)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
                                       helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
                          [numpy_helper.from_array(np.array(0.1, np.float32), "k")])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_every_float32_becomes_float64_subgraphs_included(tmp_path):
    wide = float64_copy(onnx.load(model(tmp_path)))
    text = str(wide)
    assert "data_type: 1\n" not in text and "elem_type: 1\n" not in text  # no FLOAT left
    cast = next(n for n in wide.graph.node if n.op_type == "Cast")
    assert cast.attribute[0].i == TensorProto.DOUBLE


def test_the_reference_is_the_float64_result(tmp_path):
    path = model(tmp_path)
    x = np.array([1.0, 2.5, -7.25], np.float32)
    run = lambda fn, names, steps, carry: [fn(f) for f in steps]  # noqa: E731 - one step, nothing carried
    (got,) = float64_steps(path, ["y"], [{"x": x, "flag": np.array(True)}], {}, run)
    want = x.astype(np.float64) * np.float64(np.float32(0.1)) + np.float64(np.float32(1 / 3)) \
        + np.float64(np.float32(1e-3))
    assert got[0].dtype == np.float64
    np.testing.assert_allclose(got[0], want, rtol=1e-15)
    f32 = (x * np.float32(0.1) + np.float32(1 / 3)) + np.float32(1e-3)
    ours, l2 = worst_vs([[f32]], [got])
    assert 0 < ours < 1e-6 and 0 < l2 < 1e-6  # fp32 rounding, measured against the float64 run


def test_a_model_the_numpy_backend_cannot_widen_gets_no_reference(tmp_path):
    g = helper.make_graph([helper.make_node("NoSuchOp", ["x"], ["y"], domain="example.invalid")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    path = tmp_path / "bad.onnx"
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("example.invalid", 1)]
    onnx.save(helper.make_model(g, opset_imports=opsets), path)
    assert float64_steps(path, ["y"], [{"x": np.ones(1, np.float32)}], {}, lambda *a: None) is None


def test_resize_scales_stay_float32(tmp_path):
    """The spec types Resize's scales as float whatever the data's type: the widened copy casts them back
    (a double scales tensor made the copy invalid, so the model had no reference)."""
    g = helper.make_graph([helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 4, 6])],
                          [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")])
    path = tmp_path / "resize.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    wide = float64_copy(onnx.load(path))
    onnx.checker.check_model(wide, full_check=True)
    x = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3) / 7
    run = lambda fn, names, steps, carry: [fn(f) for f in steps]  # noqa: E731
    got = float64_steps(path, ["y"], [{"x": x}], {}, run)
    assert got is not None and got[0][0].dtype == np.float64 and got[0][0].shape == (1, 1, 4, 6)
    import onnxruntime as ort
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got[0][0], ref, rtol=1e-6)
