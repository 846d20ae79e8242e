"""Types behind com.microsoft nodes (nnrt_core/frontends/onnx/contrib_shapes.py):
onnx's inference knows no contrib op, so nnrt's rules give their outputs the
shapes ONNX Runtime computes, and the nodes after them are inferred again."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.helper import np_dtype_to_tensor_dtype

from nnrt_core.frontends.onnx import load_onnx

R = np.random.default_rng(0)
F = np.float32


def _f(*shape: int) -> np.ndarray:
    return R.standard_normal(shape).astype(F)


def _model(op: str, inputs: list, attrs: dict, n_out: int, want: list | None = None) -> tuple[bytes, dict]:
    names, vis, feeds = [], [], {}
    for name, value in inputs:
        names.append(name if value is not None else "")
        if value is not None:
            vis.append(helper.make_tensor_value_info(name, np_dtype_to_tensor_dtype(value.dtype), value.shape))
            feeds[name] = value
    outs = [f"o{i}" for i in range(n_out)]
    nodes = [helper.make_node(op, names, outs, domain="com.microsoft", name="contrib", **attrs)]
    nodes += [helper.make_node("Identity", [o], [f"{o}_next"], name=f"next{i}") for i, o in enumerate(outs)]
    nodes += [helper.make_node("Identity", [f"{o}_next"], [f"{o}_out"], name=f"id{i}") for i, o in enumerate(outs)]
    # graph outputs with symbolic dims only (the checker wants a rank): all sizes come from the rules
    graph = helper.make_graph(nodes, "g", vis, [helper.make_tensor_value_info(
        f"{o}_out", _OUT_TYPES.get(op, {}).get(i, TensorProto.FLOAT) if want is None
        else np_dtype_to_tensor_dtype(want[i].dtype),
        None if want is None else [f"{o}_{j}" for j in range(want[i].ndim)]) for i, o in enumerate(outs)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    return model.SerializeToString(), feeds


H = 16
_OUT_TYPES = {"EmbedLayerNormalization": {1: TensorProto.INT32}}  # outputs that are not float
CASES = {
    "FastGelu": ([("x", _f(2, 3, 8)), ("b", _f(8))], {}, 1),
    "BiasGelu": ([("x", _f(2, 3, 8)), ("b", _f(8))], {}, 1),
    "SkipLayerNormalization": ([("x", _f(2, 3, 8)), ("s", _f(2, 3, 8)), ("g", _f(8)), ("b", _f(8))], {}, 1),
    "FusedMatMul": ([("a", _f(2, 5, 4)), ("b", _f(2, 6, 4))], {"transB": 1, "alpha": 0.5}, 1),
    "FusedMatMul_batch": ([("a", _f(5, 2, 4)), ("b", _f(2, 4, 6))], {"transBatchA": 1}, 1),
    "DynamicQuantizeMatMul": ([("a", _f(2, 3, 8)), ("b", R.integers(-5, 5, (8, 6)).astype(np.int8)),
                               ("s", np.array([0.1], F))], {}, 1),
    "MatMulIntegerToFloat": ([("a", R.integers(0, 9, (3, 8)).astype(np.uint8)),
                              ("b", R.integers(0, 9, (8, 6)).astype(np.uint8)),
                              ("sa", np.array(0.1, F)), ("sb", np.array([0.1], F))], {}, 1),
    "Attention": ([("x", _f(2, 5, 8)), ("w", _f(8, 3 * H)), ("b", _f(3 * H))], {"num_heads": 2}, 1),
    "MultiHeadAttention": ([("q", _f(2, 5, H)), ("k", _f(2, 7, H)), ("v", _f(2, 7, H))], {"num_heads": 4}, 1),
    "EmbedLayerNormalization": ([("ids", R.integers(0, 9, (2, 5)).astype(np.int32)), ("seg", None), ("w", _f(10, 8)),
                                 ("p", _f(6, 8)), ("se", None), ("g", _f(8)), ("be", _f(8))], {}, 2),
    "DynamicQuantizeLSTM": ([("x", _f(4, 2, 3)), ("w", R.integers(-5, 5, (2, 3, 16)).astype(np.int8)),
                             ("r", R.integers(-5, 5, (2, 4, 16)).astype(np.int8)), ("b", None), ("sl", None),
                             ("h0", None), ("c0", None), ("p", None), ("ws", np.array([0.1, 0.1], F)),
                             ("wz", np.zeros(2, np.int8)), ("rs", np.array([0.1, 0.1], F)),
                             ("rz", np.zeros(2, np.int8))], {"hidden_size": 4, "direction": "bidirectional"}, 3),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_contrib_output_types_are_the_shapes_onnxruntime_computes(name):
    inputs, attrs, n_out = CASES[name]
    op = name.split("_")[0]
    data, feeds = _model(op, inputs, attrs, n_out)
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    data, feeds = _model(op, inputs, attrs, n_out, want)
    graph = load_onnx(data).graph
    node = next(n for n in graph.nodes if n.domain == "com.microsoft")
    for out, w in zip(node.outputs, want):
        assert out.type is not None and tuple(out.type.shape) == w.shape, f"{out.name}: {out.type} vs {w.shape}"
    ident = {n.outputs[0].name: n.outputs[0] for n in graph.nodes if n.op_type == "Identity"}
    for i, w in enumerate(want):  # the node after it is inferred from the rule's type
        assert tuple(ident[f"o{i}_next"].type.shape) == w.shape


def _stft_2d_model(length):
    from onnx_models import make_model, vi

    nodes = [helper.make_node("STFT", ["x", "step", "win", ""], ["y"], onesided=1, name="stft"),
             helper.make_node("Relu", ["y"], ["z"], name="relu")]
    inits = [numpy_helper.from_array(np.array(5, np.int64), "step"),
             numpy_helper.from_array(np.hanning(20).astype(F), "win")]
    return make_model(nodes, [vi("x", shape=(1, length))], [vi("z", shape=("a", "b", "c", "d"))], opset=17,
                      inits=inits)


@pytest.mark.parametrize("length", [200, "n"])
def test_stft_of_a_batch_length_signal_gets_onnxruntime_shape(length):
    """ONNX Runtime accepts STFT of a ``[batch, length]`` signal (Kokoro's
    vocoder); onnx's inference (spec: ``[batch, length, 1|2]``) typed nothing
    behind it, so every node after it had no rank and OpenVINO refused the
    partition ('Parameter operation with dynamic rank')."""
    m = _stft_2d_model(length)
    g = load_onnx(m.SerializeToString()).graph
    x = _f(1, 200)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for v in (g.nodes[0].outputs[0], g.nodes[1].outputs[0]):
        assert v.type.shape is not None and len(v.type.shape) == 4, v.type
        assert [d for d in v.type.shape if isinstance(d, int)] == [d for d, s in zip(want.shape, v.type.shape)
                                                                    if isinstance(s, int)]
    if length == 200:
        assert g.nodes[0].outputs[0].type.shape == want.shape


def test_nodes_after_a_2d_stft_stay_on_openvino():
    pytest.importorskip("nnrt_openvino")
    from nnrt_core import ScheduleConfig, Session

    m = _stft_2d_model("n")
    sess = Session(m.SerializeToString(), ScheduleConfig(backends=["openvino"]))
    assert not [e for e in sess.events if e.kind == "compile_fallback"], [e.message for e in sess.events]
    assert sess.placement["relu"] == "openvino"
    x = np.random.default_rng(17).standard_normal((1, 300)).astype(F)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    # Two FFTs differ by float32 rounding that scales with the spectrum, not with each bin: compare on max|ref|.
    np.testing.assert_allclose(sess.run({"x": x})["z"], want, rtol=0, atol=1e-5 * np.abs(want).max())


def _computed_reshape_model():
    """x [1, S, 512] -> Reshape to Concat(Unsqueeze(Gather(Shape(x), 0)), Unsqueeze(Gather(Shape(x), 1)), [2],
    [256]) -> Relu: DeepFilterNet3's GRU input, as torch exports it at opset 12 (Unsqueeze axes attribute)."""
    from onnx_models import make_model, vi

    c = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["g0"]), helper.make_node("Gather", ["s", "i1"], ["g1"]),
             helper.make_node("Unsqueeze", ["g0"], ["u0"], axes=[0]),
             helper.make_node("Unsqueeze", ["g1"], ["u1"], axes=[0]),
             helper.make_node("Concat", ["u0", "u1", "two", "half"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
             helper.make_node("Relu", ["r"], ["y"], name="relu")]
    return make_model(nodes, [vi("x", shape=(1, "S", 512))], [vi("y", shape=("a", "b", "c", "d"))], opset=12,
                      inits=[c("i0", 0), c("i1", 1), c("two", [2]), c("half", [256])])


def test_a_reshape_to_a_computed_shape_has_the_shape_tensors_rank():
    """onnx's inference gave such a Reshape (and all after it) no rank:
    OpenVINO then refused DeepFilterNet3's GRU partitions ('Parameter operation
    with dynamic rank')."""
    g = load_onnx(_computed_reshape_model().SerializeToString()).graph
    for node in g.nodes[-2:]:
        assert node.outputs[0].type.shape is not None and len(node.outputs[0].type.shape) == 4


def test_nodes_after_a_computed_reshape_stay_on_openvino():
    pytest.importorskip("nnrt_openvino")
    from nnrt_core import ScheduleConfig, Session

    m = _computed_reshape_model()
    sess = Session(m.SerializeToString(), ScheduleConfig(backends=["openvino"]))
    assert not [e for e in sess.events if e.kind == "compile_fallback"], [e.message for e in sess.events]
    assert sess.placement["relu"] == "openvino"
    x = _f(1, 7, 512)
    np.testing.assert_array_equal(sess.run({"x": x})["y"], np.maximum(x.reshape(1, 7, 2, 256), 0))


def test_constant_node_bounds_reach_the_reinference_behind_a_computed_reshape():
    """DeepFilterNet3 again: Shape of the reshaped value, sliced with bounds
    from Constant nodes (not initializers), concatenated, and reshaped to:
    the re-inference now reads the Constant nodes' values, so the Slice has
    length 2, the second Reshape rank 3, and OpenVINO keeps every node."""
    from onnx_models import make_model, vi

    m = _computed_reshape_model()
    g = m.graph
    g.output.pop()
    g.node.extend([
        helper.make_node("Shape", ["y"], ["s2"]),
        helper.make_node("Constant", [], ["b0"], value=numpy_helper.from_array(np.array([0], np.int64))),
        helper.make_node("Constant", [], ["b1"], value=numpy_helper.from_array(np.array([2], np.int64))),
        helper.make_node("Constant", [], ["last"], value=numpy_helper.from_array(np.array([512], np.int64))),
        helper.make_node("Slice", ["s2", "b0", "b1"], ["lead"]),
        helper.make_node("Concat", ["lead", "last"], ["shape2"], axis=0),
        helper.make_node("Reshape", ["y", "shape2"], ["z"], name="reshape2"),
        helper.make_node("Neg", ["z"], ["out"], name="neg")])
    g.output.append(vi("out", shape=("p", "q", "r")))
    nodes = {n.op_type: n for n in load_onnx(m.SerializeToString()).graph.nodes}
    assert nodes["Slice"].outputs[0].type.shape == (2,)
    assert nodes["Concat"].outputs[0].type.shape == (3,)
    pytest.importorskip("nnrt_openvino")
    from nnrt_core import ScheduleConfig, Session

    sess = Session(m.SerializeToString(), ScheduleConfig(backends=["openvino"]))
    assert set(sess.placement.values()) == {"openvino"}, [e.message for e in sess.events]
    x = _f(1, 5, 512)
    np.testing.assert_array_equal(sess.run({"x": x})["out"], -np.maximum(x, 0))
