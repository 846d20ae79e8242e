"""Zero-copy tensors: Session.allocate_input, Tensor feeds and outputs kept on the device."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from conftest import make_registry
from fakes import fake_plugin, make_fake_backend
from nnrt_core import InputError, ScheduleConfig, Session, Tensor


def _chain(shape=(1, 3, 8, 8)) -> bytes:
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Sigmoid", ["a"], ["b"], name="sigmoid"),
             helper.make_node("Neg", ["b"], ["y"], name="neg")]
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.fixture
def x() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)


def test_npu_input_and_output_stay_on_the_device(x):
    sess = Session(_chain(), ScheduleConfig(precision="fp16", backends=["npu_emu"]))
    want = sess.run({"x": x})["y"]
    assert sess.stats()["host_device_copies"] == 2  # upload + download
    t = sess.allocate_input("x")
    assert t.on_device and t.device == "npu_emu" and t.shape == (1, 3, 8, 8)
    t.numpy()[:] = x  # device memory is mapped into the host: no copy
    out = sess.run({"x": t}, keep_on_device=True)["y"]
    assert isinstance(out, Tensor) and out.on_device
    assert sess.stats()["host_device_copies"] == 2  # nothing more copied
    np.testing.assert_array_equal(out.numpy(), want)
    # an output tensor can be fed straight back
    again = sess.run({"x": out}, keep_on_device=False)["y"]
    assert isinstance(again, np.ndarray) and sess.stats()["host_device_copies"] == 3  # the download only


def test_fake_device_backend_tensor_feed_is_not_uploaded_again(x):
    fake = make_fake_backend("dev", {"Relu", "Sigmoid", "Neg"}, priority=50, device_memory=True)
    sess = Session(_chain(), ScheduleConfig(backends=["dev"]), registry=make_registry(fake_plugin(fake)))
    backend = sess.executor.steps[0].backend
    want = sess.run({"x": x})["y"]
    uploads = backend.to_device_calls
    t = sess.allocate_input("x")
    t.copy_from(x)  # no host mapping on this device: copy_from uploads once
    assert backend.to_device_calls == uploads + 1
    before = sess.stats()["host_device_copies"]
    out = sess.run({"x": t}, keep_on_device=True)["y"]
    assert backend.to_device_calls == uploads + 1 and sess.stats()["host_device_copies"] == before
    np.testing.assert_array_equal(out.numpy(), want)


def test_host_backends_allocate_host_tensors(x):
    sess = Session(_chain(), ScheduleConfig(backends=["numpy"]))
    t = sess.allocate_input("x")
    assert not t.on_device and t.device == "host"
    t.copy_from(x)
    np.testing.assert_array_equal(sess.run({"x": t})["y"], sess.run({"x": x})["y"])
    out = sess.run({"x": x}, keep_on_device=True)["y"]
    assert isinstance(out, np.ndarray)  # host outputs are plain arrays


def test_device_tensor_fed_to_a_host_session_is_copied_and_counted(x):
    npu = Session(_chain(), ScheduleConfig(precision="fp16", backends=["npu_emu"]))
    t = npu.allocate_input("x")
    t.copy_from(x)
    host = Session(_chain(), ScheduleConfig(backends=["numpy"]))
    np.testing.assert_array_equal(host.run({"x": t})["y"], host.run({"x": x})["y"])
    assert host.stats()["host_device_copies"] == 1


def test_bad_tensors_are_clear_errors(x):
    sess = Session(_chain(), ScheduleConfig(precision="fp16", backends=["npu_emu"]))
    small = Tensor.from_numpy(np.zeros((1, 3, 4, 4), np.float32))
    with pytest.raises(InputError, match=r"holds float32\[1, 3, 4, 4\]"):
        sess.run({"x": small})
    with pytest.raises(InputError, match="holds float64"):
        sess.run({"x": Tensor.from_numpy(x.astype(np.float64))})
    t = sess.allocate_input("x")
    with pytest.raises(InputError, match="got float32"):
        t.copy_from(np.zeros((2, 3), np.float32))
    with pytest.raises(InputError, match="unknown input"):
        sess.allocate_input("nope")
    np.testing.assert_allclose(sess.run({"x": x})["y"], -1 / (1 + np.exp(-np.maximum(x, 0))), atol=2e-3)  # usable


def test_dynamic_inputs_need_a_shape():
    sess = Session(_chain(shape=("N", 3, 8, 8)), ScheduleConfig(backends=["numpy"]))
    with pytest.raises(InputError, match="pass shape="):
        sess.allocate_input("x")
    with pytest.raises(InputError, match="cannot allocate"):
        sess.allocate_input("x", shape=(2, 4, 8, 8))
    assert sess.allocate_input("x", shape=(2, 3, 8, 8)).shape == (2, 3, 8, 8)
