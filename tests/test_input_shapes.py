"""``ScheduleConfig.input_shapes``: fixing free input dimensions at load time
(ONNX Runtime's free-dimension overrides, OpenVINO's ``reshape``) so that
static shapes propagate and a static-shape device (the NPU) can claim nodes."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import ConfigError, InputError

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("nnrt_npu_emu")

NPU = dict(precision="fp16", backends=["npu_emu", "onnxruntime"], backup="numpy")


def _model(nodes, inputs, outputs, inits=(), opset=13) -> onnx.ModelProto:
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _conv_model() -> onnx.ModelProto:
    """Conv -> Relu -> GlobalAveragePool with a dynamic batch and H/W."""
    w = nh.from_array(np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.2, "w")
    return _model([h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                   h.make_node("Relu", ["c"], ["r"]),
                   h.make_node("GlobalAveragePool", ["r"], ["y"])],
                  [h.make_tensor_value_info("x", T.FLOAT, ["N", 3, "H", "W"])],
                  [h.make_tensor_value_info("y", T.FLOAT, ["N", 4, 1, 1])], [w])


def _paddle_reshape_model() -> onnx.ModelProto:
    """The Paddle2ONNX flatten pattern: Shape -> Cast(int32) -> Slice ->
    Cast(int64) -> Concat -> Reshape.  ONNX's data propagation stops at Cast,
    so the Reshape stays dynamic until nnrt has folded the chain."""
    inits = [nh.from_array(np.array([0], np.int64), "s0"), nh.from_array(np.array([1], np.int64), "s1"),
             nh.from_array(np.array([0], np.int64), "ax"), nh.from_array(np.array([-1], np.int32), "minus1")]
    nodes = [
        h.make_node("GlobalAveragePool", ["x"], ["p"]),
        h.make_node("Shape", ["p"], ["sh"]),
        h.make_node("Cast", ["sh"], ["sh32"], to=T.INT32),
        h.make_node("Slice", ["sh32", "s0", "s1", "ax"], ["batch32"]),
        h.make_node("Concat", ["batch32", "minus1"], ["target32"], axis=0),
        h.make_node("Cast", ["target32"], ["target"], to=T.INT64),
        h.make_node("Reshape", ["p", "target"], ["flat"]),
        h.make_node("Relu", ["flat"], ["y"]),
    ]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["N", 8, "H", "W"])],
                  [h.make_tensor_value_info("y", T.FLOAT, ["a", "b"])], inits)


# ------------------------------------------------------------------ config
def test_config_validates_and_normalizes():
    cfg = ScheduleConfig(input_shapes={"x": [1, 3, 48, 320]})
    assert cfg.input_shapes == {"x": (1, 3, 48, 320)}
    assert ScheduleConfig.from_dict(cfg.to_dict()) == cfg
    assert ScheduleConfig().input_shapes == {}
    for bad in ([1, 2], {"x": "1,3"}, {"x": [1, -1]}, {"x": [1.5]}, {"x": [True]}, {"": [1]}, {"x": 3}):
        with pytest.raises(ConfigError, match="input_shapes"):
            ScheduleConfig(input_shapes=bad)


def test_config_from_toml(tmp_path):
    p = tmp_path / "nnrt.toml"
    p.write_text('backends = ["npu_emu", "onnxruntime"]\n[input_shapes]\nx = [1, 3, 32, 32]\n')
    assert ScheduleConfig.from_file(p).input_shapes == {"x": (1, 3, 32, 32)}


def test_checked_against_the_model():
    m = _conv_model()
    with pytest.raises(ConfigError, match=r"unknown input\(s\) \['data'\].*x \[N, 3, H, W\]"):
        Session(m, ScheduleConfig(input_shapes={"data": [1, 3, 8, 8]}))
    with pytest.raises(ConfigError, match=r"rank 4 \(shape \[N, 3, H, W\]\), got 3"):
        Session(m, ScheduleConfig(input_shapes={"x": [3, 8, 8]}))
    with pytest.raises(ConfigError, match="fixed dimension 1 of size 3"):
        Session(m, ScheduleConfig(input_shapes={"x": [1, 4, 8, 8]}))


# ---------------------------------------------------------- what it changes
def test_static_shapes_let_the_npu_claim_nodes():
    m = _conv_model()
    x = np.random.default_rng(1).random((1, 3, 16, 24), dtype=np.float32)
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]

    dyn = Session(m, ScheduleConfig(**NPU))
    assert set(dyn.placement.values()) == {"onnxruntime"}
    assert all("static shapes" in p.rejected["npu_emu"] for p in dyn.placement_report)
    assert not [e for e in dyn.events if e.kind == "compile_fallback"]

    fixed = Session(m, ScheduleConfig(**NPU, input_shapes={"x": x.shape}))
    assert set(fixed.placement.values()) == {"npu_emu"}
    assert fixed.inputs[0].shape == (1, 3, 16, 24)
    assert fixed.outputs[0].shape == (1, 4, 1, 1)
    out = fixed.run({"x": x})["y"]
    np.testing.assert_allclose(out, ref, rtol=2e-2, atol=5e-3 * np.abs(ref).max())
    never = Session(m, ScheduleConfig(**NPU, specialize_shapes="never"))
    np.testing.assert_array_equal(never.run({"x": x})["y"], ref)
    assert set(never.placement.values()) == {"onnxruntime"}
    # without input_shapes, the first run plans for its shapes: the same placement as given shapes
    np.testing.assert_array_equal(dyn.run({"x": x})["y"], out)
    assert dyn.placement == fixed.placement

    # a feed of another shape is refused like any other wrong feed
    with pytest.raises(InputError, match="dimension 2 to be 16"):
        fixed.run({"x": np.zeros((1, 3, 32, 24), np.float32)})


def test_types_behind_folded_shape_chains_become_static():
    m = _paddle_reshape_model()
    x = np.random.default_rng(2).random((1, 8, 6, 10), dtype=np.float32)
    sess = Session(m, ScheduleConfig(**NPU, input_shapes={"x": x.shape}))
    flat = next(v for n in sess.graph.nodes for v in n.outputs if v.name == "flat")
    assert flat.type.shape == (1, 8)
    assert set(sess.placement.values()) == {"npu_emu"}
    assert sess.pass_report.rewrites("constant_folding") > 0
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(sess.run({"x": x})["y"], ref, rtol=2e-2, atol=1e-3)


def test_the_callers_model_is_not_modified():
    m = _conv_model()
    before = m.SerializeToString()
    Session(m, ScheduleConfig(backends=["numpy"], input_shapes={"x": [2, 3, 8, 8]}))
    assert m.SerializeToString() == before


def test_ir_models_too():
    from nnrt_core import GraphBuilder

    b = GraphBuilder("tiny")
    x = b.input("x", "float32", ["N", 8])
    w = np.random.default_rng(3).random((8, 4)).astype(np.float32)
    b.output(b.relu(x @ w), "y")
    model = b.build()
    sess = Session(model, ScheduleConfig(**NPU, input_shapes={"x": [2, 8]}))
    assert sess.inputs[0].shape == (2, 8)
    assert "npu_emu" in sess.placement.values()
    xs = np.ones((2, 8), np.float32)
    np.testing.assert_allclose(sess.run({"x": xs})["y"], np.maximum(xs @ w, 0), rtol=2e-2)
    assert model.graph.inputs[0].type.shape == ("N", 8)  # the caller's IR is untouched


def test_part_of_the_model_cache_key(tmp_path):
    m = _conv_model()
    cfg = ScheduleConfig(**NPU, cache_dir=str(tmp_path), input_shapes={"x": [1, 3, 8, 8]})
    a = Session(m, cfg)
    b = Session(m, cfg.replace(input_shapes={"x": [1, 3, 16, 16]}))
    assert not a.cache_hit and not b.cache_hit and a.cache_path != b.cache_path
    c = Session(m, cfg)
    assert c.cache_hit and c.cache_path == a.cache_path
    assert c.inputs[0].shape == (1, 3, 8, 8)
    x = np.random.default_rng(4).random((1, 3, 8, 8), dtype=np.float32)
    np.testing.assert_array_equal(c.run({"x": x})["y"], a.run({"x": x})["y"])
