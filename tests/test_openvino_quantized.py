"""Quantized ops OpenVINO computes otherwise than ONNX / ONNX Runtime.

DequantizeLinear with a zero point: OpenVINO's CPU computes
``fma(x, scale, -zero_point * scale)`` with the bias rounded to float32, 1 ulp
off ONNX's ``(x - zero_point) * scale`` for some scales (text2tashkeel's int8
embedding, scale 0.0113246, zero point 125: 87 of the 256 values); declined
only where a run-time quantizer downstream can turn that ulp into another
integer (a float consumer, e.g. a static QDQ chain OpenVINO runs whole, keeps it).
``com.microsoft::DynamicQuantizeLSTM``: OpenVINO runs a float LSTM with the
dequantized weights, where ONNX Runtime's op quantizes X and H at every step.
So does ``DynamicQuantizeMatMul`` (a float MatMul; ONNX Runtime quantizes A).
The rules in ``nnrt_openvino.deviations`` send exactly those nodes to the backup."""
from __future__ import annotations

import numpy as np
import pytest
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

pytest.importorskip("openvino")
pytest.importorskip("nnrt_openvino")

from nnrt_core import ScheduleConfig, Session  # noqa: E402

NO_CACHE = {"capability_cache": False}
X = np.arange(256, dtype=np.uint8).reshape(1, 256)


def dq_model(scale, zero_point, axis: int | None = None, requantized: bool = True) -> bytes:
    """y = DequantizeLinear(x: uint8 [1, 256] at run time, constant scale and zero point); when
    ``requantized``, y is also transposed and quantized again at run time (DynamicQuantizeLinear)."""
    attrs = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], name="dq", **attrs)]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 256])]
    if requantized:
        nodes += [helper.make_node("Transpose", ["y"], ["t"], perm=[1, 0]),
                  helper.make_node("DynamicQuantizeLinear", ["t"], ["q", "qs", "qz"], name="requantize")]
        outputs += [helper.make_tensor_value_info("q", TensorProto.UINT8, [256, 1])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 256])], outputs,
                          [numpy_helper.from_array(np.asarray(scale, np.float32), "s"),
                           numpy_helper.from_array(np.asarray(zero_point, np.uint8), "z")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)]).SerializeToString()


def exact(scale, zero_point) -> np.ndarray:
    s64 = np.asarray(scale, np.float32).astype(np.float64)
    return ((X.astype(np.float64) - np.asarray(zero_point, np.float64)) * s64).astype(np.float32)


def session(data: bytes, deviations: bool = True) -> Session:
    return Session(data, ScheduleConfig(backends=["openvino"], optimization_level="none", backend_options={
        "openvino": {"known_deviations": deviations, **NO_CACHE}}))


def dq_backend(sess: Session) -> str:
    return next(r.backend for r in sess.placement_report if r.node == "dq")


def test_an_inexact_zero_point_goes_to_the_backup():
    """Quantized again at run time, one ulp can become another integer: the node goes to the backup."""
    data = dq_model(0.0113246, 125)
    sess = session(data)
    row = next(r for r in sess.placement_report if r.node == "dq")
    assert row.backend == "numpy" and "DequantizeLinear" in row.rejected["openvino"]
    got = sess.run({"x": X})
    np.testing.assert_array_equal(got["y"], exact(0.0113246, 125))
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(["q"], {"x": X})[0]
    np.testing.assert_array_equal(got["q"], ref)


def test_a_float_consumer_keeps_it_on_openvino():
    """Read as floats only (a static QDQ chain, which OpenVINO runs whole), the ulp is fp32 noise: not split."""
    sess = session(dq_model(0.0113246, 125, requantized=False))
    assert dq_backend(sess) == "openvino"
    got, want = sess.run({"x": X})["y"], exact(0.0113246, 125)
    assert np.abs(got.astype(np.float64) - want).max() <= np.spacing(np.abs(want)).max()


def test_the_rule_is_needed_on_this_openvino():
    """Without the rule OpenVINO runs the node and is 1 ulp off on some values
    (if a later OpenVINO is exact, this fails: drop the rule then)."""
    sess = session(dq_model(0.0113246, 125, requantized=False), deviations=False)
    assert sess.partitions[0].backend == "openvino"
    got = sess.run({"x": X})["y"]
    want = exact(0.0113246, 125)
    assert (got != want).any()
    assert np.abs(got.astype(np.float64) - want).max() <= np.spacing(np.abs(want)).max()


@pytest.mark.parametrize("scale, zero_point", [(0.0113246, 0), (0.1, 128), (0.5, 3)],
                         ids=["zero_point_0", "exact_bias_0.1_128", "power_of_two_scale"])
def test_exact_scales_and_zero_points_stay_on_openvino(scale, zero_point):
    sess = session(dq_model(scale, zero_point))
    assert dq_backend(sess) == "openvino"
    np.testing.assert_array_equal(sess.run({"x": X})["y"], exact(scale, zero_point))


def test_per_axis_one_inexact_channel_is_enough():
    s, z = np.array([0.5] * 255 + [0.0113246], np.float32), np.array([3] * 255 + [125], np.uint8)
    assert dq_backend(session(dq_model(s, z, axis=1))) == "numpy"
    assert dq_backend(session(dq_model(s[:255].tolist() + [0.5], z[:255].tolist() + [3], axis=1))) == "openvino"


def dq_lstm_model() -> bytes:
    """A quantize_dynamic-style LSTM: int8 W / R with per-tensor scales, fp32 X (seq 6, input 16, hidden 8)."""
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (1, 16, 32), dtype=np.int8)
    r = rng.integers(-127, 128, (1, 8, 32), dtype=np.int8)
    b = (rng.standard_normal((1, 64)) * 0.1).astype(np.float32)
    z = np.zeros(1, np.int8)
    ws, rs = np.array([0.01], np.float32), np.array([0.012], np.float32)
    inits = [numpy_helper.from_array(a, n)
             for a, n in [(w, "W"), (r, "R"), (b, "B"), (ws, "ws"), (z, "wz"), (rs, "rs"), (z, "rz")]]
    node = helper.make_node("DynamicQuantizeLSTM", ["X", "W", "R", "B", "", "", "", "", "ws", "wz", "rs", "rz"], ["Y"],
                            name="lstm", domain="com.microsoft", hidden_size=8)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [6, 1, 16])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [6, 1, 1, 8])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
                             ).SerializeToString()


def test_dynamic_quantize_lstm_goes_to_the_backup():
    data = dq_lstm_model()
    x = np.random.default_rng(1).standard_normal((6, 1, 16)).astype(np.float32)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
    sess = session(data)
    (row,) = sess.placement_report
    assert row.backend == "numpy" and "float LSTM" in row.rejected["openvino"]
    np.testing.assert_allclose(sess.run({"X": x})["Y"], ref, rtol=0, atol=1e-6 * np.abs(ref).max())
    off = session(data, deviations=False)  # OpenVINO's own conversion: a float LSTM, percents away
    assert off.partitions[0].backend == "openvino"
    assert np.abs(off.run({"X": x})["Y"] - ref).max() > 1e-3 * np.abs(ref).max()


def dq_matmul_model() -> bytes:
    """Y = DynamicQuantizeMatMul(A: fp32 [4, 64], B: int8 [64, 32], scale 0.01)."""
    b = np.random.default_rng(0).integers(-127, 128, (64, 32), dtype=np.int8)
    inits = [numpy_helper.from_array(b, "B"), numpy_helper.from_array(np.array([0.01], np.float32), "bs"),
             numpy_helper.from_array(np.zeros(1, np.int8), "bz")]
    node = helper.make_node("DynamicQuantizeMatMul", ["A", "B", "bs", "bz"], ["Y"], name="mm", domain="com.microsoft")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("A", TensorProto.FLOAT, [4, 64])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4, 32])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
                             ).SerializeToString()


def test_dynamic_quantize_matmul_goes_to_the_backup():
    data = dq_matmul_model()
    a = np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"A": a})[0]
    sess = session(data)
    (row,) = sess.placement_report
    assert row.backend == "numpy" and "float MatMul" in row.rejected["openvino"]
    np.testing.assert_allclose(sess.run({"A": a})["Y"], ref, rtol=0, atol=1e-6 * np.abs(ref).max())
    off = session(data, deviations=False)
    assert off.partitions[0].backend == "openvino"
    assert np.abs(off.run({"A": a})["Y"] - ref).max() > 1e-3 * np.abs(ref).max()


def test_a_changed_rule_changes_the_model_cache_fingerprint(monkeypatch):
    """A plan stored in the model cache before these rules existed placed DynamicQuantizeLSTM on OpenVINO:
    the rules are part of the backend's cache fingerprint, so such a plan is not reused."""
    from nnrt_openvino import deviations
    from nnrt_openvino.backend import OpenVinoBackend

    backend = OpenVinoBackend()
    before = backend.cache_fingerprint()
    assert before["deviation_rules"] == deviations.rules_digest()
    monkeypatch.setattr(deviations, "RULES", [r for r in deviations.RULES if r[1] != "DynamicQuantizeLSTM"])
    assert backend.cache_fingerprint()["deviation_rules"] != before["deviation_rules"]
