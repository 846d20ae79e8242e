"""Regression tests for constructs found in real models shipped in PyPI wheels
(benchmarks/real_models.py: silero-vad, rapidocr-onnxruntime, traceforge's
quantized T5 encoder, fp16-converted PP-OCR).  Each test builds a tiny model
with the same construct; nothing is downloaded."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from nnrt_core import ScheduleConfig, Session
from nnrt_core.backend import CompileOptions
from nnrt_core.frontends import load_onnx

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("nnrt_npu_emu")

NPU = dict(precision="fp16", backends=["npu_emu", "onnxruntime"], backup="numpy")
RNG = np.random.default_rng(0)


def _model(nodes, inputs, outputs, inits=(), opset=13, value_info=()) -> onnx.ModelProto:
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits), value_info=list(value_info))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _ort(m: onnx.ModelProto, feeds):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _npu_backend():
    from nnrt_core.registry import default_registry

    return default_registry().backends["npu_emu"].backend


# ------------------------------------------------ Paddle's dim_value: -1
def _minus_one_model() -> onnx.ModelProto:
    """ch_ppocr_mobile_v2.0_cls: input [-1, 3, ?, ?], intermediates and output
    declared with dim_value -1 too."""
    w = nh.from_array(RNG.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.2, "w")
    shape = nh.from_array(np.array([0, -1], np.int64), "shape")
    return _model(
        [h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         h.make_node("GlobalAveragePool", ["c"], ["p"]),
         h.make_node("Reshape", ["p", "shape"], ["y"])],
        [h.make_tensor_value_info("x", T.FLOAT, [-1, 3, "?", "?"])],
        [h.make_tensor_value_info("y", T.FLOAT, [-1, 8])], [w, shape],
        value_info=[h.make_tensor_value_info("p", T.FLOAT, [-1, 8, 1, 1])])


def test_negative_dim_value_is_dynamic():
    m = _minus_one_model()
    g = load_onnx(m).graph
    assert g.inputs[0].type.shape == (None, 3, None, None)
    p = next(v for n in g.nodes for v in n.outputs if v.name == "p")
    for t in (g.outputs[0].type, p.type):  # unknown (or a symbol shape inference made up), never -1
        assert not isinstance(t.shape[0], int) and not t.is_static
    x = RNG.random((1, 3, 12, 20), dtype=np.float32)
    ref = _ort(m, {"x": x})[0]
    # the NPU's run is planned for the feed's shapes (fp16 chip): its tolerance is fp16's
    for cfg, rtol in ((ScheduleConfig(backends=["numpy"]), 1e-5), (ScheduleConfig(**NPU), 2e-2)):
        sess = Session(m, cfg)
        np.testing.assert_allclose(sess.run({"x": x})["y"], ref, rtol=rtol, atol=rtol * np.abs(ref).max())
        # the NPU declines the dynamic nodes when asked, instead of failing to compile them
        assert not [e for e in sess.events if e.kind == "compile_fallback"], sess.events
    sess = Session(m, ScheduleConfig(**NPU))
    assert "static shapes" in sess.placement_report[0].rejected["npu_emu"]


def test_dim_param_question_mark_is_not_one_shared_symbol():
    # "?" twice would tell ONNX shape inference that H == W
    m = _model([h.make_node("Relu", ["x"], ["y"])], [h.make_tensor_value_info("x", T.FLOAT, [1, "?", "?"])],
               [h.make_tensor_value_info("y", T.FLOAT, [1, "?", "?"])])
    g = load_onnx(m).graph
    assert g.inputs[0].type.shape == (1, None, None)
    x = RNG.random((1, 2, 5), dtype=np.float32)
    # exact on the reference backend ("auto" would plan this run for the fp16 NPU)
    np.testing.assert_array_equal(Session(m, ScheduleConfig(backends=["numpy"])).run({"x": x})["y"], np.maximum(x, 0))


# ------------------------------------- unsorted graphs (fp16 converters)
def test_unsorted_graph_loads_like_onnxruntime_does():
    w = nh.from_array(RNG.random((4, 4)).astype(np.float32), "w")
    nodes = [h.make_node("Relu", ["m"], ["y"]),          # reads m before MatMul defines it
             h.make_node("MatMul", ["c", "w"], ["m"]),
             h.make_node("Cast", ["x"], ["c"], to=T.FLOAT)]
    m = _model(nodes, [h.make_tensor_value_info("x", T.FLOAT16, [2, 4])],
               [h.make_tensor_value_info("y", T.FLOAT, [2, 4])], [w])
    before = m.SerializeToString()
    x = RNG.random((2, 4)).astype(np.float16)
    ref = _ort(m, {"x": x})[0]
    out = Session(m, ScheduleConfig(backends=["numpy"])).run({"x": x})["y"]
    np.testing.assert_allclose(out, ref, rtol=1e-5)
    assert m.SerializeToString() == before  # sorted on a copy


# ---------------------- 0-d results of the NumPy backend; folding through them
def test_numpy_backend_returns_arrays_for_0d_outputs():
    m = _model([h.make_node("Gather", ["x", "i"], ["y"])], [h.make_tensor_value_info("x", T.INT64, [3])],
               [h.make_tensor_value_info("y", T.INT64, [])], [nh.from_array(np.array(1, np.int64), "i")])
    out = Session(m, ScheduleConfig(backends=["numpy"])).run({"x": np.array([4, 5, 6])})["y"]
    assert type(out) is np.ndarray and out.shape == () and out == 5


def test_shape_gather_unsqueeze_concat_chain_folds():
    """The attention reshape of PyTorch exports (T5): Shape -> Gather(scalar)
    -> Unsqueeze -> Concat -> Reshape.  Gather gave a numpy scalar, so constant
    folding stopped there; the NPU then claimed the Reshape (the whole graph
    could be folded) but a partition without the chain failed to compile."""
    inits = [nh.from_array(np.array(0, np.int64), "zero"), nh.from_array(np.array([0], np.int64), "ax0"),
             nh.from_array(np.array([-1, 4], np.int64), "rest")]
    nodes = [h.make_node("Shape", ["x"], ["sh"]),
             h.make_node("Gather", ["sh", "zero"], ["b"]),
             h.make_node("Unsqueeze", ["b", "ax0"], ["b1"]),
             h.make_node("Concat", ["b1", "rest"], ["target"], axis=0),
             h.make_node("Reshape", ["x", "target"], ["r"]),
             h.make_node("Relu", ["r"], ["y"])]
    m = _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [2, 8])],
               [h.make_tensor_value_info("y", T.FLOAT, [2, 2, 4])], inits)
    sess = Session(m, ScheduleConfig(**NPU))
    assert [n.op_type for n in sess.graph.nodes] == ["Reshape", "Relu"]
    assert set(sess.placement.values()) == {"npu_emu"}
    assert not [e for e in sess.events if e.kind == "compile_fallback"]
    x = RNG.standard_normal((2, 8)).astype(np.float32)
    np.testing.assert_allclose(sess.run({"x": x})["y"], _ort(m, {"x": x})[0], rtol=2e-3, atol=1e-3)


# ------------------------------------------------------- NPU fp16 numerics
def test_npu_saturates_fp32_constants_beyond_fp16():
    """T5's attention mask: (1 - mask) * finfo(float32).min.  In fp16 the
    constant became -inf and 0 * -inf = NaN; the chip saturates instead."""
    inits = [nh.from_array(np.array(1.0, np.float32), "one"),
             nh.from_array(np.array(np.finfo(np.float32).min, np.float32), "big")]
    nodes = [h.make_node("Sub", ["one", "mask"], ["inv"]),
             h.make_node("Mul", ["inv", "big"], ["bias"]),
             h.make_node("Add", ["scores", "bias"], ["s"]),
             h.make_node("Softmax", ["s"], ["y"], axis=-1)]
    m = _model(nodes, [h.make_tensor_value_info("scores", T.FLOAT, [2, 4]),
                       h.make_tensor_value_info("mask", T.FLOAT, [2, 4])],
               [h.make_tensor_value_info("y", T.FLOAT, [2, 4])], inits)
    feeds = {"scores": RNG.standard_normal((2, 4)).astype(np.float32),
             "mask": np.array([[1, 1, 1, 0], [1, 1, 0, 0]], np.float32)}
    sess = Session(m, ScheduleConfig(**NPU))
    assert set(sess.placement.values()) == {"npu_emu"}
    out = sess.run(feeds)["y"]
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, _ort(m, feeds)[0], rtol=2e-2, atol=5e-3)


def test_npu_declines_scalar_arithmetic():
    """The scale products of dynamically quantized models (x_scale * w_scale)
    are scalars: in fp16 they lose precision, and the host does them for free."""
    m = _model([h.make_node("Mul", ["a", "b"], ["s"]), h.make_node("Mul", ["x", "s"], ["y"])],
               [h.make_tensor_value_info("a", T.FLOAT, []), h.make_tensor_value_info("b", T.FLOAT, []),
                h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
               [h.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    g = load_onnx(m).graph
    cap = _npu_backend().capability(g, CompileOptions(precision="fp16"))
    assert "scalar" in cap.rejected[g.nodes[0].name]
    assert g.nodes[1].name in cap.supported  # a tensor times a scalar is fine


# --------------------------------------- If with an LSTM branch (silero-vad)
def _if_lstm_model() -> onnx.ModelProto:
    """A static pre-processing node the NPU can run, then an If (on an int64
    input, like silero's ``sr``) whose then-branch runs an LSTM reading the
    pre-processed value from the enclosing graph."""
    hidden = feat = 4
    W = nh.from_array(RNG.standard_normal((1, 4 * hidden, feat)).astype(np.float32) * 0.3, "W")
    R = nh.from_array(RNG.standard_normal((1, 4 * hidden, hidden)).astype(np.float32) * 0.3, "R")
    then_g = h.make_graph(
        [h.make_node("LSTM", ["pre", "W", "R"], ["Y", "Yh"], hidden_size=hidden),
         h.make_node("Squeeze", ["Yh", "ax0"], ["out_t"])],
        "then", [], [h.make_tensor_value_info("out_t", T.FLOAT, [1, hidden])],
        [nh.from_array(np.array([0], np.int64), "ax0")])
    else_g = h.make_graph(
        [h.make_node("ReduceMean", ["pre"], ["out_e"], axes=[0], keepdims=0)],
        "else", [], [h.make_tensor_value_info("out_e", T.FLOAT, [1, hidden])])
    nodes = [h.make_node("Mul", ["x", "gain"], ["pre"]),
             h.make_node("Equal", ["sr", "k16"], ["is16"]),
             h.make_node("If", ["is16"], ["y"], then_branch=then_g, else_branch=else_g)]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [5, 1, feat]),
                          h.make_tensor_value_info("sr", T.INT64, [])],
                  [h.make_tensor_value_info("y", T.FLOAT, [1, hidden])],
                  [W, R, nh.from_array(np.array(0.5, np.float32), "gain"),
                   nh.from_array(np.array(16000, np.int64), "k16")])


@pytest.mark.parametrize("sr", [16000, 8000])
def test_if_with_lstm_branch_across_backends(sr):
    m = _if_lstm_model()
    feeds = {"x": RNG.standard_normal((5, 1, 4)).astype(np.float32), "sr": np.array(sr, np.int64)}
    ref = _ort(m, feeds)[0]
    np.testing.assert_allclose(Session(m, ScheduleConfig(backends=["numpy"])).run(feeds)["y"], ref,
                               rtol=1e-5, atol=1e-6)
    sess = Session(m, ScheduleConfig(**NPU))
    place = {p.op_type: p.backend for p in sess.placement_report}
    assert place["Mul"] == "npu_emu" and place["If"] == "onnxruntime"  # the If is placed as one unit
    assert not [e for e in sess.events if e.kind == "compile_fallback"]
    np.testing.assert_allclose(sess.run(feeds)["y"], ref, rtol=2e-2, atol=5e-3)
