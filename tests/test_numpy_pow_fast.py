"""Pow with a single exponent of 2 or 3 on the NumPy backend: multiplied out as ONNX Runtime does,
against ORT and against ``np.power``; other exponents and shapes keep ``np.power``."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core import ScheduleConfig, Session
from nnrt_numpy.ops.math.pow import power


@pytest.mark.parametrize("exp,etype", [(3.0, np.float32), (2.0, np.float32), (3, np.int64), (2.5, np.float32)])
def test_pow_matches_ort(exp, etype) -> None:
    x = (np.random.default_rng(0).standard_normal((64, 300)) * 3).astype(np.float32)
    x[0, :4] = [np.inf, -np.inf, np.nan, -0.0]
    e = numpy_helper.from_array(np.array(exp, etype), "e")
    g = helper.make_graph([helper.make_node("Pow", ["x", "e"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 300])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 300])], [e])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)]).SerializeToString()
    want = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = Session(m, ScheduleConfig(backends=["numpy"])).run({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=0, equal_nan=True)
    if exp in (2, 3):  # ORT multiplies these out too: bit for bit (np.power's powf differs in last bits)
        np.testing.assert_array_equal(got, want)


def test_multiplied_out_within_a_rounding_of_np_power() -> None:
    x = np.random.default_rng(1).standard_normal(10_000).astype(np.float32) * 10
    for e in (2.0, 3.0):
        got = power(x, np.array(e, np.float32))
        want = np.power(x.astype(np.float64), e)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=2.5e-7)
    assert power(np.float32(2) * np.ones(()), np.array([[3.0]], np.float32)).shape == (1, 1)  # exponent grows rank
    assert power(x.astype(np.float16), np.array(3.0, np.float16)).dtype == np.float16
