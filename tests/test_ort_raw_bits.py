"""A whole-model ONNX Runtime partition gives raw ONNX Runtime's bits (issue 31,
regression 2): a model quantized by ``onnxruntime.quantization.quantize_dynamic``
(DynamicQuantizeLSTM, DynamicQuantizeLinear, MatMulInteger) ending in a
Sigmoid, delegated whole to ORT.  What changed the numbers was the plugin's own
export rewrite (``nnrt_onnxruntime/precise.py``: Sigmoid as Neg/Exp/Add/Reciprocal),
now applied only where the reference is not ORT (``precise_kernels="auto"``:
graphs imported from TFLite)."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import ConfigError

S, B, IN, HID = 12, 2, 24, 48


def float_lstm() -> onnx.ModelProto:
    """x[S, B, IN] -> 2 stacked LSTMs -> MatMul -> Sigmoid (a speaker/VAD-style score)."""
    rng = np.random.default_rng(7)
    nodes, inits, cur, cin = [], [], "x", IN
    for layer in range(2):
        inits += [nh.from_array(rng.standard_normal((1, 4 * HID, cin)).astype(np.float32) * 0.2, f"W{layer}"),
                  nh.from_array(rng.standard_normal((1, 4 * HID, HID)).astype(np.float32) * 0.2, f"R{layer}"),
                  nh.from_array(rng.standard_normal((1, 8 * HID)).astype(np.float32) * 0.1, f"B{layer}")]
        nodes += [h.make_node("LSTM", [cur, f"W{layer}", f"R{layer}", f"B{layer}"], [f"y{layer}"], hidden_size=HID,
                              name=f"lstm{layer}"),
                  h.make_node("Squeeze", [f"y{layer}", "axis1"], [f"s{layer}"], name=f"squeeze{layer}")]
        cur, cin = f"s{layer}", HID
    inits += [nh.from_array(np.array([1], np.int64), "axis1"),
              nh.from_array(rng.standard_normal((HID, 16)).astype(np.float32) * 0.3, "Wout")]
    nodes += [h.make_node("MatMul", [cur, "Wout"], ["logits"], name="head"),
              h.make_node("Sigmoid", ["logits"], ["score"], name="score")]
    g = h.make_graph(nodes, "lstm_scores", [h.make_tensor_value_info("x", T.FLOAT, [S, B, IN])],
                     [h.make_tensor_value_info("score", T.FLOAT, [S, B, 16])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def quantized(tmp_path_factory) -> str:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    folder = tmp_path_factory.mktemp("qlstm")
    src, dst = folder / "float.onnx", folder / "dynamic_int8.onnx"
    onnx.save(float_lstm(), src)
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)
    ops = {n.op_type for n in onnx.load(dst).graph.node}
    assert {"DynamicQuantizeLSTM", "MatMulInteger", "Sigmoid"} <= ops, ops
    return str(dst)


FEEDS = {"x": np.random.default_rng(3).standard_normal((S, B, IN)).astype(np.float32) * 2}


def raw_ort(path: str, level: str) -> np.ndarray:
    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, FEEDS)[0]


def test_raw_ort_itself_gives_the_same_bits_at_every_level(quantized):
    np.testing.assert_array_equal(raw_ort(quantized, "ORT_DISABLE_ALL"), raw_ort(quantized, "ORT_ENABLE_ALL"))


@pytest.mark.parametrize("level", ["none", "default"])
def test_a_whole_model_ort_partition_gives_raw_ort_bits(quantized, level):
    cfg = {} if level == "default" else {"optimization_level": level}
    sess = Session(quantized, ScheduleConfig(backends=["onnxruntime"], **cfg))
    assert len(sess.partitions) == 1 and set(sess.placement.values()) == {"onnxruntime"}
    assert sess.partitions[0].details["precise_kernels"] is False
    np.testing.assert_array_equal(sess.run(FEEDS)["score"], raw_ort(quantized, "ORT_ENABLE_ALL"))


def test_precise_kernels_on_request_still_rewrite_the_sigmoid(quantized):
    sess = Session(quantized, ScheduleConfig(backends=["onnxruntime"], optimization_level="none",
                                             backend_options={"onnxruntime": {"precise_kernels": True}}))
    assert sess.partitions[0].details["precise_kernels"] is True
    got, ref = sess.run(FEEDS)["score"], raw_ort(quantized, "ORT_ENABLE_ALL")
    assert not np.array_equal(got, ref)  # the exact form: other bits ...
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)  # ... within ORT's Sigmoid error


def test_auto_means_precise_for_graphs_from_tflite_only():
    from nnrt_core.frontends import load_onnx
    from nnrt_onnxruntime.export import wants_precise_kernels

    g = load_onnx(float_lstm()).graph
    assert g.origin == "onnx" and not wants_precise_kernels(g, {})
    g.origin = "tflite"
    assert wants_precise_kernels(g, {}) and wants_precise_kernels(g, {"precise_kernels": "auto"})
    assert not wants_precise_kernels(g, {"precise_kernels": False})


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_a_bad_precise_kernels_value_is_a_config_error(bad):
    with pytest.raises(ConfigError, match="'precise_kernels' must be true, false or \"auto\""):
        Session(float_lstm(), ScheduleConfig(backends=["onnxruntime"],
                                             backend_options={"onnxruntime": {"precise_kernels": bad}}))


def test_a_tflite_model_on_ort_keeps_the_exact_kernels():
    from tflite_models import mobilenet_like

    sess = Session(mobilenet_like(size=32, width=8, blocks=2, classes=10), ScheduleConfig(backends=["onnxruntime"]))
    assert sess.graph.origin == "tflite"
    assert [p.details["precise_kernels"] for p in sess.partitions] == [True]
