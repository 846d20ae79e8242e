"""Raw and internal errors turned into nnrt errors naming the thing (issue #35
item 5, and what the long fuzz run with seeds 35001/35002 found)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import ExecutionError, MemoryBudgetError, ModelLoadError, NnrtError, OpError
from tflite_models import TFLiteWriter


def _precision(backends) -> str:
    """The emulated NPU computes in fp16: asked for fp32 it declines its float nodes."""
    return "fp16" if "npu_emu" in backends else "fp32"


def _model(nodes, inputs, outputs, opsets=(("", 17),), inits=()) -> bytes:
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid(d, v) for d, v in opsets]).SerializeToString()


def _declared_mid(node, xs, declared, inits) -> bytes:
    """``node`` writes ``t``, declared ``declared`` (a lie the frontend keeps on an intermediate
    value, where it corrects a graph output's: tests/test_declared_outputs.py), then ``y = Identity(t)``."""
    g = h.make_graph([node, h.make_node("Identity", ["t"], ["y"], name="id")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, xs)], [h.make_tensor_value_info("y", T.FLOAT, declared)],
                     list(inits), value_info=[h.make_tensor_value_info("t", T.FLOAT, declared)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize("field, old, new", [("op_type", b"Relu", b"R\xfflu"), ("name", b"node_r", b"node\xfe\xfe"),
                                             ("output", b"yy", b"y\xff")])
def test_text_fields_that_are_not_utf8_are_model_errors(field, old, new):
    """protobuf hands invalid UTF-8 in a string field over as bytes; outside the default domain the
    checker passes it and the schema lookup raised a raw TypeError."""
    data = _model([h.make_node("Relu", ["x"], ["yy"], domain="com.x", name="node_r"),
                   h.make_node("Identity", ["yy"], ["y"])],
                  [h.make_tensor_value_info("x", T.FLOAT, [2])], [h.make_tensor_value_info("y", T.FLOAT, [2])],
                  opsets=(("", 17), ("com.x", 1)))
    data = data.replace(old, new)
    with pytest.raises(ModelLoadError, match=f"node #0: its {field}.* is not valid UTF-8 text"):
        Session(data, ScheduleConfig(backends=["numpy"]))


def _scan(out_axes) -> bytes:
    body = h.make_graph([h.make_node("Identity", ["s_in"], ["s_out"]), h.make_node("Identity", ["x_t"], ["y_t"])],
                        "b", [h.make_tensor_value_info("s_in", T.FLOAT, [2]), h.make_tensor_value_info("x_t", T.FLOAT, [2])],
                        [h.make_tensor_value_info("s_out", T.FLOAT, [2]), h.make_tensor_value_info("y_t", T.FLOAT, [2])])
    return _model([h.make_node("Scan", ["s", "x"], ["sf", "y"], body=body, num_scan_inputs=1, name="scan",
                               scan_output_axes=out_axes)],
                  [h.make_tensor_value_info("s", T.FLOAT, [2]), h.make_tensor_value_info("x", T.FLOAT, [3, 2])],
                  [h.make_tensor_value_info("sf", T.FLOAT, [2]), h.make_tensor_value_info("y", T.FLOAT, [None, None])])


@pytest.mark.parametrize("backends", [["numpy"], ["npu_emu"]])
def test_scan_output_axis_out_of_range(backends):
    with pytest.raises(ModelLoadError, match=r"'scan_output_axes' is \[4611686018427387904\]; expected axes in"):
        Session(_scan([2 ** 62]), ScheduleConfig(backends=backends, backup="numpy", precision=_precision(backends)))
    sess = Session(_scan([5]), ScheduleConfig(backends=backends, backup="numpy", precision=_precision(backends)))  # legal rank, wrong for the tensor
    feeds = {"s": np.zeros(2, np.float32), "x": np.ones((3, 2), np.float32)}
    with pytest.raises(NnrtError, match="scan_output_axes holds 5, out of range for a tensor of rank 2"):
        sess.run(feeds)
    assert Session(_scan([1]), ScheduleConfig(backends=backends, backup="numpy", precision=_precision(backends))).run(feeds)["y"].shape == (2, 3)


def _tflite_fc(mid_shape) -> bytes:
    w = TFLiteWriter()
    x = w.input("x", [2, 4])
    wt = w.const("weights", np.arange(12, dtype=np.float32).reshape(3, 4) / 10)
    b = w.const("bias", np.ones(3, np.float32))
    mid = w.tensor("h", mid_shape)
    w.op("FULLY_CONNECTED", [x, wt, b], [mid], "FullyConnectedOptions")
    c = w.const("c", np.ones(3, np.float32))
    y = w.tensor("y", [2, 3])
    w.op("ADD", [mid, c], [y], "AddOptions", FusedActivationFunction=1)
    w.outputs = [y]
    return w.build()


@pytest.mark.parametrize("mid", [[2, 4], [4, 3], [2, 1], [1, 2, 3], [6]])
@pytest.mark.parametrize("backends", [["npu_emu"], ["numpy"]])
def test_tflite_corrupted_intermediate_shape_is_refused_at_import(mid, backends):
    """The NPU failed at run ("cannot reshape", "store epilogue needs the output array") or, for a
    same-size shape, ran; now the import names the operator and the tensor."""
    with pytest.raises(ModelLoadError, match=rf"operator 0 \(FULLY_CONNECTED\): tensor 3 'h' declares shape "
                                             rf"\{mid}, but .* give \[2, 3\]".replace(" ", r"\s?")):
        Session(_tflite_fc(mid), ScheduleConfig(backends=backends, backup="numpy", precision=_precision(backends)))
    y = Session(_tflite_fc([2, 3]), ScheduleConfig(backends=backends, backup="numpy", precision=_precision(backends))).run(
        {"x": np.ones((2, 4), np.float32)})["y"]
    np.testing.assert_allclose(y, np.maximum(np.ones((2, 4)) @ (np.arange(12).reshape(3, 4) / 10).T + 2, 0),
                               rtol=2e-3)


def test_deform_conv_offset_group_0_is_refused_at_load():
    """Fuzz seed 35002 case 1883: ZeroDivisionError inside the NumPy kernel."""
    model = _model([h.make_node("DeformConv", ["x", "w", "off"], ["y"], offset_group=0, name="dc")],
                   [h.make_tensor_value_info("x", T.FLOAT, [1, 1, 3, 3]), h.make_tensor_value_info("w", T.FLOAT, [1, 1, 2, 2]),
                    h.make_tensor_value_info("off", T.FLOAT, [1, 8, 2, 2])],
                   [h.make_tensor_value_info("y", T.FLOAT, [1, 1, 2, 2])], opsets=(("", 19),))
    with pytest.raises(ModelLoadError, match=r"'offset_group' is 0; expected values >= 1"):
        Session(model, ScheduleConfig(backends=["numpy"]))


def test_emulator_declines_a_tile_whose_declared_shape_lies():
    """Fuzz seed 35001 case 794: Tile repeats [1, 1845493762, 3, 4] with the output declared [1, 2, 3, 8]:
    the emulator trusted the declared shape and numpy allocated 13.8 GiB."""
    reps = h.make_tensor("r", T.INT64, [4], [1, 1845493762, 3, 4])
    model = _declared_mid(h.make_node("Tile", ["x", "r"], ["t"], name="tile"), [1, 2, 1, 2], [1, 2, 3, 8], [reps])
    sess = Session(model, ScheduleConfig(precision="fp16", backends=["npu_emu"], backup="numpy"))
    assert sess.placement["tile"] == "numpy"
    assert any(e.kind == "node_fallback" for e in sess.events)
    rec = next(r for r in sess.placement_report if r.node == "tile")
    assert rec.rejected["npu_emu"] == ("repeats [1, 1845493762, 3, 4] of input shape [1, 2, 1, 2] do not give the "
                                       "declared output shape [1, 2, 3, 8]")
    with pytest.raises((MemoryBudgetError, OpError, ExecutionError)) as e:
        sess.run({"x": np.ones((1, 2, 1, 2), np.float32)})
    assert "Unable to allocate" not in str(e.value)


@pytest.mark.parametrize("shape, declared, fits", [([2, 3], [2, 3], True), ([4, 3], [2, 3], False)])
def test_emulator_expand_and_constant_of_shape_check_the_declared_shape(shape, declared, fits):
    s = h.make_tensor("s", T.INT64, [2], shape)
    model = _declared_mid(h.make_node("Expand", ["x", "s"], ["t"], name="expand"), [1, 3], declared, [s])
    sess = Session(model, ScheduleConfig(precision="fp16", backends=["npu_emu"], backup="numpy"))
    assert sess.placement["expand"] == ("npu_emu" if fits else "numpy")


def test_col2im_of_strings_is_an_op_error():
    """Fuzz seed 35001 case 8298: a string Col2Im (the schema allows every type) raised a raw TypeError."""
    model = _model([h.make_node("Col2Im", ["x", "img", "blk"], ["y"], name="c2i")],
                   [h.make_tensor_value_info("x", T.STRING, [1, 4, 4])],
                   [h.make_tensor_value_info("y", T.STRING, [1, 1, 3, 3])],
                   opsets=(("", 18),), inits=[h.make_tensor("img", T.INT64, [2], [3, 3]),
                                              h.make_tensor("blk", T.INT64, [2], [2, 2])])
    sess = Session(model, ScheduleConfig(backends=["numpy"]))
    with pytest.raises(OpError, match=r"node 'c2i' \(Col2Im\).*cannot be summed"):
        sess.run({"x": np.full((1, 4, 4), "a", object)})
