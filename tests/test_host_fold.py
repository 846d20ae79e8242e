"""Constant folding's trivial cases on the host (:mod:`nnrt_core.passes.host_fold`):
a ``Reshape`` of a constant, an exact ``Cast`` and a ``ConstantOfShape`` within the
budget fold without the evaluator backend, with the values it gives; every other
case is left to it."""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core.frontends.onnx import load_onnx
from nnrt_core.passes import fold_constants
from nnrt_core.passes.host_fold import host_value
from test_cold_build import _Counting
from test_lazy_loading import MODULES, _python

W = np.arange(12, dtype=np.float32)


def _model(node: onnx.NodeProto, inits: list[onnx.TensorProto], out_type: int, opset: int = 17) -> onnx.ModelProto:
    """``y = node(constants) + x``-free graph: the node's output is the graph output."""
    g = helper.make_graph([node], "m", [], [helper.make_tensor_value_info("y", out_type, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _reshape(shape: list[int], x: np.ndarray = W, **attrs: Any) -> onnx.ModelProto:
    return _model(helper.make_node("Reshape", ["w", "s"], ["y"], name="r", **attrs),
                  [numpy_helper.from_array(x, "w"), numpy_helper.from_array(np.array(shape, np.int64), "s")],
                  TensorProto.FLOAT, opset=17)


def _cast(x: np.ndarray, to: int) -> onnx.ModelProto:
    return _model(helper.make_node("Cast", ["w"], ["y"], name="c", to=to), [numpy_helper.from_array(x, "w")], to)


def _cos(shape: list[int], value: np.ndarray | None = None, opset: int = 17) -> onnx.ModelProto:
    attrs = {} if value is None else {"value": numpy_helper.from_array(value, "v")}
    dt = TensorProto.FLOAT if value is None else helper.np_dtype_to_tensor_dtype(value.dtype)
    return _model(helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos", **attrs),
                  [numpy_helper.from_array(np.array(shape, np.int64), "s")], dt, opset=opset)


def _node(model: onnx.ModelProto):
    return load_onnx(model, check=False).graph.nodes[0]


@pytest.mark.parametrize("shape,expected", [([3, 4], (3, 4)), ([-1, 6], (2, 6)), ([1, -1, 1], (1, 12, 1)),
                                            ([12], (12,)), ([2, 0, 3], None)])
def test_reshape_gives_numpys_values_in_a_fresh_array(shape, expected):
    node = _node(_reshape(shape))
    out = host_value(node)
    if expected is None:  # 0 copies input dim 1, which a 1-D input lacks
        assert out is None
        return
    (y,) = out
    np.testing.assert_array_equal(y, W.reshape(expected))
    assert y.dtype == W.dtype and y.flags.writeable and not np.shares_memory(y, node.inputs[0].const)


def test_reshape_zero_copies_the_input_dim():
    (y,) = host_value(_node(_reshape([0, -1], W.reshape(3, 4))))
    assert y.shape == (3, 4)


@pytest.mark.parametrize("shape,attrs", [([5, -1], {}), ([-1, -1], {}), ([3, -2], {}), ([7], {}),
                                         ([0, 12], {"allowzero": 1}),
                                         # sizes whose int64 product wraps around to 12: 12 * (2**62 + 1) = 3 * 2**64 + 12
                                         ([12, 2**62 + 1], {}), ([-1, 3, 2**62 + 1], {})])
def test_reshapes_outside_the_trivial_cases_are_left_to_the_evaluator(shape, attrs):
    assert host_value(_node(_reshape(shape, **attrs))) is None


def test_a_reshape_by_an_int32_shape_is_left_to_the_evaluator():
    node = _node(_reshape([3, 4]))  # the loader refuses int32 shapes; the IR could still hold one
    node.inputs[1].const = np.array([3, 4], np.int32)
    assert host_value(node) is None


@pytest.mark.parametrize("x,to", [(np.array([1, -2], np.int32), TensorProto.INT64),
                                  (np.array([1, 0], np.bool_), TensorProto.FLOAT),
                                  (np.array([250], np.uint8), TensorProto.INT32),
                                  (np.array([1.5], np.float16), TensorProto.DOUBLE)])
def test_exact_casts_fold_here(x, to):
    (y,) = host_value(_node(_cast(x, to)))
    assert y.dtype == helper.tensor_dtype_to_np_dtype(to)
    np.testing.assert_array_equal(y, x.astype(y.dtype))


@pytest.mark.parametrize("x,to", [(np.array([1.7, -2.5], np.float32), TensorProto.INT32),  # truncation
                                  (np.array([300], np.int64), TensorProto.INT8),  # wraps
                                  (np.array([1 << 40], np.int64), TensorProto.FLOAT),  # rounds
                                  (np.array([1.0], np.float32), TensorProto.STRING),
                                  (np.array([1.0], np.float32), TensorProto.FLOAT8E4M3FN),
                                  (np.array([1.0], np.float32), TensorProto.BFLOAT16)])
def test_casts_that_change_values_or_types_without_numpy_equivalents_are_left_to_the_evaluator(x, to):
    assert host_value(_node(_cast(x, to))) is None


def test_a_bad_reshape_still_gets_the_evaluators_treatment():
    """A shape that does not fit: the evaluator fails on it, the node stays."""
    g = load_onnx(_reshape([5, -1]), check=False).graph
    ev = _Counting()
    assert fold_constants(g, ev) == 0
    assert ev.compiled == [["r"]] and [n.name for n in g.nodes] == ["r"]


def test_folding_on_the_host_asks_no_evaluator():
    g = load_onnx(_reshape([3, 4]), check=False).graph
    ev = _Counting()
    assert fold_constants(g, ev) == 1 and ev.compiled == [] and g.nodes == []
    np.testing.assert_array_equal(g.initializers["y"].const, W.reshape(3, 4))


def test_an_onnxruntime_session_of_reshaped_weights_imports_no_numpy_kernel():
    """PP-OCR cls's pattern (weights Reshape'd by a constant shape, a Cast of
    a shape) folds without compiling a NumPy partition in a fresh process."""
    pytest.importorskip("onnxruntime")
    out = _python(MODULES + """
import numpy as np
from onnx import TensorProto, helper, numpy_helper
from nnrt_core import ScheduleConfig, Session
w = helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(np.arange(4, dtype=np.float32), "w"))
s = helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(np.array([1, 4], np.int32), "s"))
nodes = [w, s, helper.make_node("Cast", ["s"], ["s64"], to=TensorProto.INT64),
         helper.make_node("Reshape", ["w", "s64"], ["w2"]), helper.make_node("Add", ["x", "w2"], ["y"])]
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
sess = Session(model.SerializeToString(), ScheduleConfig(backends=["onnxruntime"]))
res = sess.run({"x": np.ones((1, 4), np.float32)})["y"].tolist()
print(json.dumps({"ops": [m for m in loaded({"nnrt_numpy"}) if m.startswith("nnrt_numpy.ops")],
                  "folded": sess.folded_nodes, "y": res}))
""")
    assert out == {"ops": [], "folded": 4, "y": [[1.0, 2.0, 3.0, 4.0]]}, out


CASES = [_reshape([3, 4]), _reshape([0, -1], W.reshape(3, 4)), _reshape([-1]),
         _cast(np.array([1, -2], np.int32), TensorProto.INT64), _cast(np.array([1, 0], np.bool_), TensorProto.FLOAT),
         _cos([2, 3]), _cos([4], np.array([7], np.int64)), _cos([2, 0, 1], np.array([1.5], np.float64)),
         _cos([], np.array([True]))]


@pytest.mark.parametrize("model", [_cos([2, -1]), _cos([3], opset=8)], ids=["negative", "opset-8"])
def test_constant_of_shape_outside_the_trivial_cases_is_left_to_the_evaluator(model):
    assert host_value(_node(model)) is None


def test_a_constant_of_shape_over_the_budget_is_left_to_the_evaluator():
    from nnrt_core.compiler.budget import build_budget
    node = _node(_cos([64, 64]))
    with build_budget(64 * 64 * 4 - 1):
        assert host_value(node) is None
    with build_budget(64 * 64 * 4):
        (y,) = host_value(node)
    assert y.shape == (64, 64) and y.dtype == np.float32 and y.flags.writeable and not y.any()


@pytest.mark.parametrize("i", range(len(CASES)))
def test_host_values_are_the_evaluators(monkeypatch, i):
    """Same values, dtype and shape through the host path as through the NumPy backend's kernels."""
    from nnrt_core.passes import constant_folding
    host = load_onnx(CASES[i], check=False).graph
    assert fold_constants(host, _Counting()) == 1
    monkeypatch.setattr(constant_folding, "host_value", lambda node: None)
    ev = _Counting()
    kernels = load_onnx(CASES[i], check=False).graph
    assert fold_constants(kernels, ev) == 1 and len(ev.compiled) == 1
    a, b = host.initializers["y"].const, kernels.initializers["y"].const
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)


def test_the_pass_report_lists_host_folds_where_the_evaluators_round_did(monkeypatch):
    from nnrt_core.passes import constant_folding
    from nnrt_core.passes.base import PassContext
    shape = numpy_helper.from_array(np.array([2, 3], np.int64), "shape")
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["w0"], name="make_w0"),
             helper.make_node("Constant", [], ["c"], name="c", value=numpy_helper.from_array(W[:6], "c")),
             helper.make_node("Reshape", ["c", "shape"], ["w1"], name="reshape_c"),
             helper.make_node("ConstantOfShape", ["shape"], ["w2"], name="make_w2"),
             helper.make_node("Cast", ["w1"], ["w3"], name="cast_w1", to=TensorProto.DOUBLE)]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("w0", "w2")]
    outs.append(helper.make_tensor_value_info("w3", TensorProto.DOUBLE, None))
    g = helper.make_graph(nodes, "m", [], outs, [shape])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

    def notes() -> list[str]:
        ctx = PassContext(evaluator=_Counting())
        return constant_folding.ConstantFolding().run(load_onnx(model, check=False).graph, ctx).notes
    host = notes()
    monkeypatch.setattr(constant_folding, "host_value", lambda node: None)
    assert host == notes() and len(host) == 5, host
