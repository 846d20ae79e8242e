"""Session construction from every model form, feed validation, outputs."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import ConfigError, InputError, ModelLoadError
from nnrt_core.frontends import load_onnx


def two_output_model():
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Add", ["x", "b"], ["s"], name="add")],
        "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, ["batch", 3]),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, ["batch", 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


CFG = ScheduleConfig(backends=["numpy"])
FEEDS = {"x": np.array([[-1, 0, 2]], np.float32), "b": np.ones((1, 3), np.float32)}


@pytest.mark.parametrize("form", ["proto", "bytes", "path", "ir_model", "ir_graph"])
def test_every_model_form(tmp_path, form):
    proto = two_output_model()
    model = {
        "proto": lambda: proto,
        "bytes": lambda: proto.SerializeToString(),
        "path": lambda: (tmp_path / "m.onnx").write_bytes(proto.SerializeToString()) and str(tmp_path / "m.onnx"),
        "ir_model": lambda: load_onnx(proto),
        "ir_graph": lambda: load_onnx(proto).graph,
    }[form]()
    sess = Session(model, CFG)
    out = sess.run(FEEDS)
    assert list(out) == ["s", "r"]  # graph-output order
    np.testing.assert_array_equal(out["s"], [[0, 1, 3]])
    np.testing.assert_array_equal(out["r"], [[0, 0, 2]])


def test_io_info_and_output_selection():
    sess = Session(two_output_model(), CFG)
    assert [(i.name, i.dtype, i.shape) for i in sess.inputs] == [
        ("x", np.float32, ("batch", 3)), ("b", np.float32, (1, 3))]
    assert [o.name for o in sess.outputs] == ["s", "r"]
    assert list(sess.run(FEEDS, output_names=["r"])) == ["r"]
    with pytest.raises(InputError, match=r"unknown output\(s\) \['zz'\]"):
        sess.run(FEEDS, output_names=["zz"])
    # symbolic dims accept any size
    big = {"x": np.zeros((5, 3), np.float32), "b": FEEDS["b"]}
    assert sess.run(big)["s"].shape == (5, 3)


@pytest.mark.parametrize("feeds,match", [
    ({"x": FEEDS["x"]}, r"missing input\(s\) \['b'\]"),
    ({**FEEDS, "extra": FEEDS["x"]}, r"unknown input\(s\) \['extra'\]; the model's inputs are \['x', 'b'\]"),
    ({"x": FEEDS["x"].astype(np.float64), "b": FEEDS["b"]}, "input 'x' expects dtype float32, got float64"),
    ({"x": np.zeros(3, np.float32), "b": FEEDS["b"]}, r"input 'x' expects rank 2 \(shape \[batch, 3\]\), got shape \(3,\)"),
    ({"x": np.zeros((1, 4), np.float32), "b": FEEDS["b"]}, "input 'x' expects dimension 1 to be 3"),
    ({"x": [[1.0, 2.0, 3.0]], "b": FEEDS["b"]}, "input 'x' expects a numpy array of float"),
])
def test_feed_validation_names_input_and_expectation(feeds, match):
    sess = Session(two_output_model(), CFG)
    with pytest.raises(InputError, match=match):
        sess.run(feeds)


def test_feeds_must_be_mapping():
    sess = Session(two_output_model(), CFG)
    with pytest.raises(InputError, match="feeds must be a mapping"):
        sess.run([FEEDS["x"]])  # type: ignore[arg-type]


def test_unknown_backend_and_scheduler_names():
    with pytest.raises(ConfigError, match="unknown backend 'tpu'; installed backends: .*numpy"):
        Session(two_output_model(), ScheduleConfig(backends=["tpu"]))
    with pytest.raises(ConfigError, match="unknown scheduler 'random'; installed schedulers: .*priority"):
        Session(two_output_model(), ScheduleConfig(backends=["numpy"], scheduler="random"))
    with pytest.raises(ConfigError, match="config must be a ScheduleConfig"):
        Session(two_output_model(), {"backends": ["numpy"]})  # type: ignore[arg-type]


def test_unsupported_option_warns_or_refuses_when_strict():
    sess = Session(two_output_model(), ScheduleConfig(backends=["numpy"], precision="fp16"))
    assert any(e.kind == "option_ignored" and "precision" in e.message for e in sess.events)
    with pytest.raises(ConfigError, match=r"does not support option\(s\) \['precision'\] \(strict=True\)"):
        Session(two_output_model(), ScheduleConfig(backends=["numpy"], precision="fp16", strict=True))


def test_bad_model_is_model_load_error():
    with pytest.raises(ModelLoadError):
        Session(b"garbage", CFG)


def test_runtime_kernel_error_names_node_and_session_stays_usable():
    g = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape_it")], "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])])
    sess = Session(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), CFG)
    from nnrt_core.errors import NnrtError

    with pytest.raises(NnrtError, match="reshape_it"):
        sess.run({"x": np.zeros(6, np.float32), "shape": np.array([4, 4], np.int64)})
    ok = sess.run({"x": np.zeros(6, np.float32), "shape": np.array([2, 3], np.int64)})
    assert ok["y"].shape == (2, 3)


def test_unused_graph_input_is_accepted_and_not_forwarded():
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("unused", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    sess = Session(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), CFG)
    out = sess.run({"x": np.array([-1, 1], np.float32), "unused": np.zeros(2, np.float32)})
    np.testing.assert_array_equal(out["y"], [0, 1])
    assert sess.partitions[0].inputs == ("x",)
