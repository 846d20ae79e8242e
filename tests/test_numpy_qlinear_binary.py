"""QLinearAdd / QLinearMul (com.microsoft) on the NumPy backend against ONNX Runtime's own kernels."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import NnrtError

QTYPES = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}


def qlinear_binary_model(op_type: str, dtype: type, a_shape: list[int], b_shape: list[int]) -> bytes:
    elem = QTYPES[dtype]
    scales = {"a_scale": 0.05, "b_scale": 0.02, "c_scale": 0.07}
    zps = {"a_zp": 3, "b_zp": -4 if dtype is np.int8 else 130, "c_zp": 9}
    inits = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in scales.items()]
    inits += [numpy_helper.from_array(np.array(v, dtype), k) for k, v in zps.items()]
    node = helper.make_node(op_type, ["a", "a_scale", "a_zp", "b", "b_scale", "b_zp", "c_scale", "c_zp"], ["c"],
                            domain="com.microsoft")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", elem, a_shape),
                                            helper.make_tensor_value_info("b", elem, b_shape)],
                              [helper.make_tensor_value_info("c", elem, [None] * max(len(a_shape), len(b_shape)))], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    return model.SerializeToString()


@pytest.mark.parametrize("op_type", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("shapes", [([2, 3, 4], [2, 3, 4]), ([2, 3, 4], [4]), ([1, 3, 1], [2, 1, 5])])
def test_matches_onnxruntime(op_type, dtype, shapes):
    data = qlinear_binary_model(op_type, dtype, *shapes)
    info = np.iinfo(dtype)
    rng = np.random.default_rng(0)
    feeds = {"a": rng.integers(info.min, info.max + 1, shapes[0]).astype(dtype),
             "b": rng.integers(info.min, info.max + 1, shapes[1]).astype(dtype)}
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = Session(data, ScheduleConfig(backends=["numpy"])).run(feeds)["c"]
    assert got.dtype == want.dtype and got.shape == want.shape
    # ORT computes through a float lookup table; one step apart at exact halves at most
    assert np.abs(got.astype(np.int32) - want.astype(np.int32)).max() <= 1


@pytest.mark.parametrize("op_type", ["QLinearAdd", "QLinearMul"])
def test_shapes_that_do_not_broadcast_are_refused_by_name(op_type):
    data = qlinear_binary_model(op_type, np.uint8, [2, 3], [4])
    with pytest.raises(NnrtError, match="broadcast|shape"):
        Session(data, ScheduleConfig(backends=["numpy"])).run(
            {"a": np.zeros((2, 3), np.uint8), "b": np.zeros(4, np.uint8)})
