"""Quantized and compressed TFLite models: int8 per-axis / uint8 per-tensor
tensors become QDQ (the NPU's int8 path applies), fp16 and sparse constants
are decoded at import.  Checked against LiteRT within one quantization step."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytest.importorskip("tflite")
pytest.importorskip("ai_edge_litert")

from tflite_models import TFLiteWriter, litert_run  # noqa: E402

from nnrt_core import ScheduleConfig, Session  # noqa: E402
from nnrt_core.frontends.tflite import load_tflite  # noqa: E402

#: OpenVINO where its plugin is installed (QDQ from TFLite runs there as from ONNX files)
BACKENDS = ["numpy", "onnxruntime", "npu_emu"] + (["openvino"] if importlib.util.find_spec("nnrt_openvino") else [])


def int8_conv_model(float_io: bool) -> tuple[bytes, np.ndarray, float]:
    """QUANTIZE -> int8 conv (per-axis weights) -> int8 depthwise -> DEQUANTIZE, or int8 in/out."""
    rng = np.random.default_rng(3)
    w = TFLiteWriter()
    s_in, z_in, s_mid, z_mid, s_out, z_out = 0.02, -3, 0.05, 5, 0.04, -10
    if float_io:
        xf = w.input("x", [1, 8, 8, 3])
        x = w.tensor("xq", [1, 8, 8, 3], np.int8, quant=(s_in, z_in, 0))
        w.op("QUANTIZE", [xf], [x])
    else:
        x = w.input("x", [1, 8, 8, 3], np.int8, quant=(s_in, z_in, 0))
    ws = rng.uniform(0.005, 0.01, 4).astype(np.float32)
    wt = w.const("w", rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8), quant=(ws, np.zeros(4), 0))
    b = w.const("b", rng.integers(-500, 500, 4).astype(np.int32), quant=(ws * s_in, np.zeros(4), 0))
    y = w.tensor("y", [1, 8, 8, 4], np.int8, quant=(s_mid, z_mid, 0))
    w.op("CONV_2D", [x, wt, b], [y], "Conv2DOptions", Padding=0, StrideW=1, StrideH=1, FusedActivationFunction=1)
    dws = rng.uniform(0.005, 0.02, 4).astype(np.float32)
    dw = w.const("dw", rng.integers(-127, 128, (1, 3, 3, 4)).astype(np.int8), quant=(dws, np.zeros(4), 3))
    db = w.const("db", rng.integers(-100, 100, 4).astype(np.int32), quant=(dws * s_mid, np.zeros(4), 0))
    z = w.tensor("z", [1, 4, 4, 4], np.int8, quant=(s_out, z_out, 0))
    w.op("DEPTHWISE_CONV_2D", [y, dw, db], [z], "DepthwiseConv2DOptions", Padding=0, StrideW=2, StrideH=2,
         DepthMultiplier=1, DilationWFactor=1, DilationHFactor=1)
    if float_io:
        zf = w.tensor("out", [1, 4, 4, 4])
        w.op("DEQUANTIZE", [z], [zf])
        w.outputs = [zf]
        feed = rng.uniform(-2, 2, (1, 8, 8, 3)).astype(np.float32)
    else:
        w.outputs = [z]
        feed = rng.integers(-128, 128, (1, 8, 8, 3)).astype(np.int8)
    return w.build(), feed, s_out


@pytest.mark.parametrize("float_io", [True, False])
@pytest.mark.parametrize("backend", BACKENDS)
def test_int8_per_axis_model_matches_litert_within_one_step(float_io, backend):
    model, feed, step = int8_conv_model(float_io)
    ref = litert_run(model, [feed])[0]
    precision = "int8" if backend == "npu_emu" else "fp32"
    sess = Session(model, ScheduleConfig(backends=[backend], optimization_level="all", precision=precision))
    got = list(sess.run({"x": feed}).values())[0]
    assert got.dtype == ref.dtype and got.shape == ref.shape
    if backend == "openvino":  # the quantized Conv runs on it, not on the backup
        assert any(p.backend == backend and p.op_type == "Conv" for p in sess.placement_report)
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    limit = 1.01 * step if float_io else 1
    assert diff.max() <= limit, diff.max()
    ops = {n.op_type for n in load_tflite(model).graph.nodes}
    assert {"QuantizeLinear", "DequantizeLinear", "Conv"} <= ops


def test_int8_model_runs_the_npu_int8_path():
    model, feed, _ = int8_conv_model(False)
    # a model this small costs less on the host than its two copies to and from the chip, so island merging
    # would move its NPU partition between the two host Transposes to the host: a pin keeps it on the NPU
    sess = Session(model, ScheduleConfig(backends=["npu_emu"], backup="numpy", precision="int8",
                                         pins={"conv_2d_0": "npu_emu"}))
    # every Q/DQ and conv runs in int8 on the NPU; the two boundary (NHWC<->NCHW) int8 Transposes on the host
    on_host = [p.node for p in sess.placement_report if p.backend != "npu_emu"]
    assert on_host == ["x__nchw__transpose", "z__nhwc__transpose"], sess.placement_report
    npu = [p for p in sess.partitions if p.backend == "npu_emu"]
    assert len(npu) == 1 and npu[0].details["chip"].split("/")[1].startswith("emu-npu-i8")
    ref = litert_run(model, [feed])[0]
    assert np.abs(sess.run({"x": feed})["z"].astype(int) - ref.astype(int)).max() <= 1


def test_per_tensor_weights_are_quantized_constants_behind_dequantize_linear():
    model, _, _ = int8_conv_model(True)
    g = load_tflite(model).graph
    w = next(v for v in g.initializers.values() if v.name.startswith("w__"))
    assert w.const.dtype == np.int8 and w.const.shape == (4, 3, 3, 3)  # OHWI -> OIHW, still int8
    dq = w.uses[0][0]
    assert dq.op_type == "DequantizeLinear" and dq.attr("axis") == 0


def test_uint8_per_tensor_add_and_fully_connected():
    rng = np.random.default_rng(5)
    w = TFLiteWriter()
    a = w.input("a", [2, 6], np.uint8, quant=(0.1, 128, 0))
    b = w.input("b", [2, 6], np.uint8, quant=(0.05, 100, 0))
    s = w.tensor("s", [2, 6], np.uint8, quant=(0.12, 120, 0))
    w.op("ADD", [a, b], [s], "AddOptions", FusedActivationFunction=0)
    wt = w.const("w", rng.integers(0, 256, (3, 6)).astype(np.uint8), quant=(0.01, 127, 0))
    bias = w.const("bias", rng.integers(-300, 300, 3).astype(np.int32), quant=(0.12 * 0.01, 0, 0))
    y = w.tensor("y", [2, 3], np.uint8, quant=(0.08, 130, 0))
    w.op("FULLY_CONNECTED", [s, wt, bias], [y], "FullyConnectedOptions")
    w.outputs = [y]
    model = w.build()
    feeds = {"a": rng.integers(0, 256, (2, 6)).astype(np.uint8), "b": rng.integers(0, 256, (2, 6)).astype(np.uint8)}
    ref = litert_run(model, list(feeds.values()))[0]
    for be in BACKENDS[:2] + BACKENDS[3:]:  # not the NPU: fp16
        got = Session(model, ScheduleConfig(backends=[be])).run(feeds)["y"]
        assert got.dtype == np.uint8 and np.abs(got.astype(int) - ref.astype(int)).max() <= 1


def test_fp16_constant_behind_dequantize_becomes_a_float32_constant():
    w = TFLiteWriter()
    x = w.input("x", [2, 3])
    c16 = w.const("c16", np.arange(6, dtype=np.float16).reshape(2, 3) / 3)
    c = w.tensor("c", [2, 3])
    w.op("DEQUANTIZE", [c16], [c])
    y = w.tensor("y", [2, 3])
    w.op("ADD", [x, c], [y], "AddOptions")
    w.outputs = [y]
    model = w.build()
    g = load_tflite(model).graph
    assert [n.op_type for n in g.nodes] == ["Add"]
    const = next(v for v in g.initializers.values())
    assert const.const.dtype == np.float32
    feed = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(Session(model, ScheduleConfig(backends=["numpy"])).run({"x": feed})["y"], litert_run(model, [feed])[0], rtol=1e-6)


def test_weights_are_views_of_the_file_bytes():
    """No copy where no layout change is needed: FULLY_CONNECTED weights and biases share the model bytes."""
    rng = np.random.default_rng(0)
    w = TFLiteWriter()
    x = w.input("x", [1, 64])
    wt = w.const("w", rng.standard_normal((32, 64)).astype(np.float32))
    b = w.const("b", rng.standard_normal(32).astype(np.float32))
    y = w.tensor("y", [1, 32])
    w.op("FULLY_CONNECTED", [x, wt, b], [y], "FullyConnectedOptions")
    w.outputs = [y]
    model = w.build()
    g = load_tflite(model).graph
    for name in ("w", "b"):
        arr = g.initializers[name].const
        assert np.shares_memory(arr, np.frombuffer(model, np.uint8)), name
        assert not arr.flags.writeable


def test_densify_of_a_sparse_constant_matches_litert():
    rng = np.random.default_rng(9)
    dense = rng.standard_normal((6, 10)).astype(np.float32)
    dense[rng.random((6, 10)) < 0.7] = 0
    dense[2] = 0  # an empty row
    w = TFLiteWriter()
    x = w.input("x", [3, 10])
    sp = w.sparse_const("w_sparse", dense)
    wd = w.tensor("w", [6, 10])
    w.op("DENSIFY", [sp], [wd])
    y = w.tensor("y", [3, 6])
    w.op("FULLY_CONNECTED", [x, wd, w.const("b", np.zeros(6, np.float32))], [y], "FullyConnectedOptions")
    w.outputs = [y]
    model = w.build()
    g = load_tflite(model).graph
    np.testing.assert_array_equal(g.initializers["w"].const, dense)  # densified at import, no DENSIFY node
    feed = rng.standard_normal((3, 10)).astype(np.float32)
    ref = litert_run(model, [feed])[0]
    for be in BACKENDS[:2]:
        got = Session(model, ScheduleConfig(backends=[be])).run({"x": feed})["y"]
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_corrupt_sparsity_is_refused_naming_the_tensor():
    from nnrt_core.errors import ModelLoadError
    dense = np.eye(4, dtype=np.float32)
    w = TFLiteWriter()
    x = w.input("x", [1, 4])
    sp = w.sparse_const("w_sparse", dense)
    w.tensors[sp]["sparse"] = (4, np.array([0, 1, 2, 3, 9], np.int32), np.array([0, 1, 2, 7], np.int32))
    wd = w.tensor("w", [4, 4])
    w.op("DENSIFY", [sp], [wd])
    y = w.tensor("y", [1, 4])
    w.op("FULLY_CONNECTED", [x, wd, -1], [y], "FullyConnectedOptions")
    w.outputs = [y]
    with pytest.raises(ModelLoadError, match="'w_sparse'.*(segments|outside)"):
        load_tflite(w.build())
