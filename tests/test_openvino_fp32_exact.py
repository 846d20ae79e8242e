"""precision='fp32' on OpenVINO is fp32: its CPU quantizes activations at run
time where they meet compressed (int8) weights unless told not to."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("openvino")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from nnrt_core import ScheduleConfig, Session  # noqa: E402

RNG = np.random.default_rng(0)
K = N = 256


def cast_weight_model() -> tuple[bytes, np.ndarray]:
    """x @ (float(int8 W) * scale): weights stored int8 and widened in the graph (quantize_dynamic's form)."""
    rng = np.random.default_rng(1)
    w = rng.integers(-127, 128, size=(K, N), dtype=np.int8)
    s = rng.random(N, dtype=np.float32) * 0.02 + 0.01
    nodes = [helper.make_node("Cast", ["wq"], ["wf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["wf", "ws"], ["w"]), helper.make_node("MatMul", ["x", "w"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, N])],
                          [numpy_helper.from_array(w, "wq"), numpy_helper.from_array(s, "ws")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    return m.SerializeToString(), w.astype(np.float64) * s


def _session(extra=None) -> Session:
    data, _ = cast_weight_model()
    return Session(data, ScheduleConfig(backends=["openvino"], optimization_level="none",  # the Cast reaches OpenVINO
                                        backend_options={"openvino": extra or {}}))


def test_fp32_keeps_activations_in_fp32_next_to_compressed_weights():
    _, w = cast_weight_model()
    x = RNG.standard_normal((4, K)).astype(np.float32)
    sess = _session()
    exact = x.astype(np.float64) @ w
    err = np.abs(sess.run({"x": x})["y"] - exact).max() / np.abs(exact).max()
    assert err < 1e-5  # OpenVINO's default (activations quantized in groups of 32): 4.5e-3
    assert sess.compiled_model.steps[0].compiled.describe()["config"]["DYNAMIC_QUANTIZATION_GROUP_SIZE"] == 0


def test_the_user_may_ask_for_openvino_s_dynamic_quantization():
    sess = _session({"DYNAMIC_QUANTIZATION_GROUP_SIZE": 32})
    assert sess.compiled_model.steps[0].compiled.describe()["config"]["DYNAMIC_QUANTIZATION_GROUP_SIZE"] == 32
