"""Post-training int8 quantization (``nnrt_core.quantization``, ``nnrt quantize``).

The accuracy tests train a small CNN on scikit-learn's digits at test time
(``tests/digits_cnn.py``, fixed seed, about a second), quantize it with our
calibration and check the held-out accuracy of the int8 QDQ model on the
NumPy backend, ONNX Runtime and the emulated NPU's int8 chip.
"""
from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from nnrt_core import ScheduleConfig, Session
from nnrt_core.tools.cli import main
from nnrt_core.errors import ConfigError, NnrtError, QuantizationError
from nnrt_core.frontends import load_onnx
from nnrt_core.quantization import (
    Progress,
    QuantizationConfig,
    TensorStats,
    activation_qparams,
    choose_range,
    kl_threshold,
    load_calibration,
    quantize,
)

sys.path.insert(0, str(Path(__file__).parent))
from digits_cnn import accuracy, load_digits_split, to_onnx_model, train_digits_cnn  # noqa: E402

I8, F16 = "emu-npu-i8", "emu-npu-f16"
NUMPY = ScheduleConfig(backends=["numpy"])


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def digits():
    return load_digits_split(seed=0)


@pytest.fixture(scope="module")
def float_model(digits) -> onnx.ModelProto:
    return to_onnx_model(train_digits_cnn(digits, seed=0))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, float_model, digits) -> Path:
    d = tmp_path_factory.mktemp("quant")
    onnx.save(float_model, d / "digits.onnx")
    np.savez(d / "calib.npz", image=digits.x_train[:200])
    return d


@pytest.fixture(scope="module")
def int8_minmax(workdir):
    return quantize(workdir / "digits.onnx", workdir / "calib.npz", workdir / "digits_int8.onnx", progress=False)


def _predict_session(model, x: np.ndarray, cfg: ScheduleConfig) -> tuple[np.ndarray, Session]:
    sess = Session(model, cfg)
    return np.array([sess.run({"image": x[i:i + 1]})["logits"][0].argmax() for i in range(len(x))]), sess


def _predict_ort(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return np.array([s.run(None, {"image": x[i:i + 1]})[0][0].argmax() for i in range(len(x))])


def _npu(chip: str, precision: str, **kw) -> ScheduleConfig:
    return ScheduleConfig(backends=["npu_emu"], backup="numpy", precision=precision, devices={"npu_emu": chip}, **kw)


# ------------------------------------------------------- accuracy on real data
def test_int8_digits_cnn_keeps_accuracy_on_numpy_onnxruntime_and_npu(float_model, int8_minmax, digits):
    x, y = digits.x_test, digits.y_test
    pred_f, _ = _predict_session(float_model, x, NUMPY)
    acc_float = accuracy(pred_f, y)
    assert acc_float >= 0.95, acc_float
    assert accuracy(_predict_ort(float_model, x), y) == acc_float

    q = int8_minmax.proto
    acc = {"numpy": accuracy(_predict_session(q, x, NUMPY)[0], y), "onnxruntime": accuracy(_predict_ort(q, x), y)}
    pred_npu, sess = _predict_session(q, x, _npu(I8, "int8"))
    acc["npu_emu int8"] = accuracy(pred_npu, y)
    for backend, a in acc.items():
        assert a >= acc_float - 0.01, (backend, a, acc_float)
    # the whole int8 model runs on the int8-only chip: one partition, integer conv/gemm kernels
    assert [p.backend for p in sess.partitions] == ["npu_emu"], [(p.backend, p.nodes) for p in sess.partitions]
    per_op = sess.partitions[0].details["per_op"]
    kernels = [op["kernel"] for op in per_op]
    assert kernels.count("qconv") == 2 and kernels.count("qgemm") == 1, kernels
    assert all(op["dtype"] == "int8" for op in per_op if op["kernel"].startswith("q"))
    assert "conv" not in kernels and "unary" not in kernels  # Relu fused into the int8 conv


def test_npu_cost_model_shows_int8_speedup(float_model, int8_minmax, tmp_path):
    float_sess = Session(float_model, _npu(F16, "fp16"))
    int8_sess = Session(int8_minmax.proto, _npu(I8, "int8"))
    f = float_sess.partitions[0].details
    q = int8_sess.partitions[0].details
    assert float_sess.partitions[0].backend == int8_sess.partitions[0].backend == "npu_emu"
    assert f["precision"] == "fp16" and "int8" in q["precision"]
    assert q["est_cycles"] < f["est_cycles"] and q["est_time_ms"] < f["est_time_ms"], (q["est_cycles"], f["est_cycles"])
    # the same comparison on one chip with both an fp16 and an int8 datapath (same clock, bandwidth, launch cost)
    prof = tmp_path / "dual.json"
    prof.write_text(json.dumps({"chips": [{
        "name": "emu-npu-dual", "dtypes": ["fp16", "int8"], "macs_per_cycle": {"fp16": 1024, "int8": 2048},
        "clock_mhz": 800, "bandwidth_gbps": 25.6, "onchip_kib": 2048, "device_memory_mib": 512,
        "launch_cycles": 400}]}))
    opts = {"npu_emu": {"profile_file": str(prof)}}
    fd = Session(float_model, _npu("emu-npu-dual", "fp16", backend_options=opts)).partitions[0].details
    qd = Session(int8_minmax.proto, _npu("emu-npu-dual", "int8", backend_options=opts)).partitions[0].details
    assert qd["est_cycles"] < fd["est_cycles"], (qd["est_cycles"], fd["est_cycles"])


@pytest.mark.parametrize("options", [
    {"method": "percentile", "percentile": 99.99},
    {"method": "entropy"},
    {"method": "entropy", "symmetric": True},
    {"method": "minmax", "activation_type": "uint8", "per_channel": False},
])
def test_calibration_methods_keep_accuracy(workdir, float_model, digits, options):
    res = quantize(workdir / "digits.onnx", workdir / "calib.npz", progress=False, **options)
    x, y = digits.x_test, digits.y_test
    acc_float = accuracy(_predict_ort(float_model, x), y)
    acc_q = accuracy(_predict_ort(res.proto, x), y)
    assert acc_q >= acc_float - 0.01, (options, acc_q, acc_float)
    t = res.report.tensors
    for name, info in t.items():
        lo, hi = info["range"]
        if options.get("symmetric"):
            assert lo == -hi and info["zero_point"] == 0 and info["dtype"] == "int8"
        elif options["method"] != "minmax":  # clipping methods never widen the observed range
            assert info["observed_min"] <= lo + 1e-6 or lo == 0 and hi <= info["observed_max"] + 1e-6
        if options.get("activation_type") == "uint8":
            assert info["dtype"] == "uint8"
    if options["method"] == "entropy" and not options.get("symmetric"):
        # KL clips the long ReLU tail of the first conv
        assert t["r1"]["range"][1] < t["r1"]["observed_max"]


# --------------------------------------------------------------- QDQ format
def test_qdq_model_structure(int8_minmax, workdir):
    proto = onnx.load(str(workdir / "digits_int8.onnx"))
    onnx.checker.check_model(proto, full_check=True)
    g = proto.graph
    inits = {t.name: nh.to_array(t) for t in g.initializer}
    by_out = {o: n for n in g.node for o in n.output}
    assert [o.name for o in g.output] == ["logits"] and [i.name for i in g.input] == ["image"]
    assert by_out["logits"].op_type == "DequantizeLinear"
    assert not any(a.dtype == np.float32 and a.ndim > 1 for a in inits.values())  # no float weights left
    for node_name, w, channels in (("conv1", "w1", 8), ("conv2", "w2", 16), ("fc", "w3", 10)):
        node = next(n for n in g.node if n.name == node_name)
        wdq = by_out[node.input[1]]
        assert wdq.op_type == "DequantizeLinear"
        assert inits[wdq.input[0]].dtype == np.int8 and inits[wdq.input[1]].shape == (channels,)
        assert {a.name: a.i for a in wdq.attribute}.get("axis", 1) == 0  # output channels (Gemm transB=1)
        assert np.abs(inits[wdq.input[0]]).max() == 127
        bdq = by_out[node.input[2]]
        assert inits[bdq.input[0]].dtype == np.int32
        xdq = by_out[node.input[0]]
        x_scale = inits[xdq.input[1]]
        np.testing.assert_allclose(inits[bdq.input[1]], np.float32(x_scale) * inits[wdq.input[1]], rtol=1e-6)
        assert not inits[bdq.input[2]].any()
    # Relu fused: Conv -> Relu directly, then Q
    relu = next(n for n in g.node if n.name == "relu1")
    assert by_out[relu.input[0]].op_type == "Conv"
    # MaxPool / Flatten reuse their input's parameters (no requantization)
    rep = int8_minmax.report
    assert rep.tensors["p1"]["scale"] == rep.tensors["r1"]["scale"]
    assert rep.tensors["f"]["shares"] == "r2"
    assert rep.fused_activations == {"c1": "relu1", "c2": "relu2"}
    assert rep.weights and rep.biases == 3 and rep.size_after < rep.size_before


def test_quantized_outputs_close_to_float_and_agree_across_backends(float_model, int8_minmax, digits):
    x = digits.x_test[:1]
    ref = Session(float_model, NUMPY).run({"image": x})["logits"]
    qn = Session(int8_minmax.proto, NUMPY).run({"image": x})["logits"]
    qo = ort.InferenceSession(int8_minmax.proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"image": x})[0]
    qp = Session(int8_minmax.proto, _npu(I8, "int8")).run({"image": x})["logits"]
    lsb = int8_minmax.report.tensors["logits"]["scale"]
    assert np.abs(qn - qo).max() <= 2 * lsb + 1e-6
    assert np.abs(qn - qp).max() <= 2 * lsb + 1e-6
    assert np.abs(qn - ref).max() <= 0.05 * np.abs(ref).max()


def _mixed_model() -> onnx.ModelProto:
    """Residual + swish + GAP + MatMul + Softmax: many op kinds in int8 groups."""
    rs = np.random.RandomState(0)

    def w(name, *shape):
        return nh.from_array((rs.randn(*shape) * 0.3).astype(np.float32), name)

    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             h.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], group=8, name="dw"),
             h.make_node("Add", ["c2", "r1"], ["a2"], name="residual"),
             h.make_node("Sigmoid", ["a2"], ["s2"], name="sig"),
             h.make_node("Mul", ["a2", "s2"], ["m2"], name="swish"),
             h.make_node("GlobalAveragePool", ["m2"], ["g"], name="gap"),
             h.make_node("Reshape", ["g", "shape"], ["f"], name="reshape"),
             h.make_node("MatMul", ["f", "w3"], ["mm"], name="fc"),
             h.make_node("Add", ["mm", "b3"], ["y0"], name="fc_bias"),
             h.make_node("Softmax", ["y0"], ["y"], name="softmax")]
    inits = [w("w1", 8, 3, 3, 3), w("b1", 8), w("w2", 8, 1, 3, 3), w("w3", 8, 10), w("b3", 10),
             nh.from_array(np.array([-1, 8], np.int64), "shape")]
    g = h.make_graph(nodes, "mixed", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 16, 16])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 10])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("activation_type", ["int8", "uint8"])
def test_mixed_ops_model_runs_everywhere(activation_type):
    m = _mixed_model()
    rs = np.random.RandomState(1)
    res = quantize(m, {"x": rs.rand(16, 1, 3, 16, 16).astype(np.float32)}, progress=False,
                   activation_type=activation_type)
    assert set(res.report.op_counts) == {"Conv", "Relu", "Add", "Sigmoid", "Mul", "GlobalAveragePool", "Reshape",
                                         "MatMul", "Softmax"}
    mm_w = next(w for w in res.report.weights if w["name"] == "w3")
    assert mm_w["axis"] == 1  # MatMul [K, N]: per output column
    assert res.report.tensors["y"]["range"] == [0.0, 1.0] and res.report.tensors["y"]["fixed_by_op"]
    x = rs.rand(1, 3, 16, 16).astype(np.float32)
    ref = Session(m, NUMPY).run({"x": x})["y"]
    qn = Session(res.proto, NUMPY).run({"x": x})["y"]
    qo = ort.InferenceSession(res.proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    sess = Session(res.proto, _npu(I8, "int8"))
    qp = sess.run({"x": x})["y"]
    assert [p.backend for p in sess.partitions] == ["npu_emu"]
    lsb = res.report.tensors["y"]["scale"]
    assert np.abs(qn - qo).max() <= 2 * lsb + 1e-6 and np.abs(qn - qp).max() <= 2 * lsb + 1e-6
    assert np.abs(qn - ref).max() <= 0.02


def test_dynamic_batch_calibrates_in_batches_with_same_ranges(digits, float_model):
    params = {t.name: nh.to_array(t) for t in float_model.graph.initializer}
    dyn = to_onnx_model(params, batch="N")
    x = digits.x_train[:70]
    batched = quantize(dyn, {"image": x}, progress=False, batch_size=32)  # [70, 1, 8, 8]: 3 runs
    per_sample = quantize(dyn, {"image": x[:, None]}, progress=False)  # [70, 1, 1, 8, 8]: 70 runs
    assert batched.report.runs == 3 and per_sample.report.runs == 70
    assert batched.report.samples == per_sample.report.samples == 70
    for name, info in batched.report.tensors.items():
        # same data, batched or not (BLAS may sum a batch in another order: float rounding only)
        assert info["scale"] == pytest.approx(per_sample.report.tensors[name]["scale"], rel=1e-5), name
    out = Session(batched.proto, NUMPY).run({"image": digits.x_test[:5]})["logits"]
    assert out.shape == (5, 10)


def test_folder_of_npz_files_and_extra_arrays(workdir, digits, tmp_path):
    folder = tmp_path / "calib"
    folder.mkdir()
    np.savez(folder / "a.npz", image=digits.x_train[:30], label=digits.y_train[:30])
    np.savez(folder / "b.npz", image=digits.x_train[30:50, None])  # the other layout, per file
    (folder / "README.txt").write_text("not data")
    res = quantize(workdir / "digits.onnx", folder, progress=False)
    assert res.report.samples == 50 and res.report.runs == 50
    assert res.report.ignored_arrays == ["label"]
    ref = quantize(workdir / "digits.onnx", {"image": digits.x_train[:50]}, progress=False)
    assert res.report.tensors == ref.report.tensors


def test_load_calibration_feeds(workdir, digits):
    inputs = load_onnx(workdir / "digits.onnx").graph.inputs  # image: [1, 1, 8, 8]
    cs = load_calibration({"image": digits.x_train[:6], "label": digits.y_train[:6]}, inputs)
    assert len(cs) == 6 and cs.samples == 6 and cs.ignored == ["label"]
    assert all(f["image"].shape == (1, 1, 8, 8) and f["image"].dtype == np.float32 for f in cs.feeds)
    np.testing.assert_array_equal(cs.feeds[3]["image"][0], digits.x_train[3])
    assert load_calibration(cs, inputs) is cs


def test_input_model_is_not_modified(workdir, digits):
    m = load_onnx(workdir / "digits.onnx")
    before = [(n.name, n.op_type, [v.name for v in n.inputs]) for n in m.graph.nodes]
    quantize(m, {"image": digits.x_train[:8]}, progress=False)
    assert [(n.name, n.op_type, [v.name for v in n.inputs]) for n in m.graph.nodes] == before


# --------------------------------------------------------- range selection
def _stats(x: np.ndarray, bins: int = 2048) -> TensorStats:
    st = TensorStats("t")
    st.observe(x)
    st.observe_hist(x, bins)
    return st


def test_range_methods_on_known_distributions():
    rs = np.random.default_rng(0)
    u = rs.uniform(-1.0, 3.0, 200_000).astype(np.float32)
    st = _stats(u)
    assert choose_range(st, QuantizationConfig()) == (float(u.min()), float(u.max()))
    lo, hi = choose_range(st, QuantizationConfig(method="percentile", percentile=99.0))
    assert lo == pytest.approx(-1.0 + 0.04, abs=0.01) and hi == pytest.approx(3.0 - 0.04, abs=0.01)
    lo, hi = choose_range(st, QuantizationConfig(method="percentile", percentile=99.0, symmetric=True))
    assert lo == -hi and hi == pytest.approx(3.0 - 0.04, abs=0.01)
    g = rs.standard_normal(200_000).astype(np.float32)
    g[:20] = 40.0  # rare outliers: KL clips them, min-max does not
    st = _stats(g)
    lo, hi = choose_range(st, QuantizationConfig(method="entropy"))
    assert 2.5 < hi < 10.0 and -10.0 < lo < -2.5
    assert kl_threshold(np.r_[np.ones(100), np.zeros(1948)]) == 100  # fits in 128 levels: keep it all


def test_activation_qparams():
    cfg = QuantizationConfig()
    p = activation_qparams(0.0, 2.55, cfg)
    assert p.dtype == "int8" and p.zero_point == -128 and p.scale == pytest.approx(0.01)
    p = activation_qparams(-1.0, 3.0, QuantizationConfig(activation_type="uint8"))
    assert p.dtype == "uint8" and p.zero_point == round(1.0 / p.scale) and p.scale == pytest.approx(4 / 255)
    p = activation_qparams(0.5, 2.0, cfg)  # the range always contains 0 (exact zero padding)
    assert p.lo == 0.0 and p.zero_point == -128
    p = activation_qparams(-0.5, 2.0, QuantizationConfig(symmetric=True))
    assert p.zero_point == 0 and p.scale == pytest.approx(2.0 / 127)
    p = activation_qparams(0.0, 0.0, cfg)  # constant zero tensor: any positive scale is exact
    assert p.scale == 1.0


# ------------------------------------------------------------------ progress
def test_progress_bar_renders_only_when_enabled():
    buf = io.StringIO()
    with Progress(4, "calibrating", enabled=True, stream=buf) as bar:
        for _ in range(4):
            bar.update()
    text = buf.getvalue()
    assert "calibrating" in text and "4/4" in text and "#" * 30 in text and text.endswith("\n")
    quiet = io.StringIO()  # not a terminal: nothing by default
    with Progress(4, "calibrating", stream=quiet) as bar:
        bar.update(4)
    assert quiet.getvalue() == ""


def test_quantize_shows_progress_on_request(workdir, digits, capsys):
    quantize(workdir / "digits.onnx", {"image": digits.x_train[:5]}, progress=True)
    err = capsys.readouterr().err
    assert "calibrating (minmax)" in err and "5/5" in err
    quantize(workdir / "digits.onnx", {"image": digits.x_train[:5]}, progress=False, method="entropy")
    assert capsys.readouterr().err == ""


# -------------------------------------------------------------- bad input
@pytest.mark.parametrize("data, match", [
    ({"image": np.zeros((0, 1, 8, 8), np.float32)}, "empty"),
    ({"img": np.zeros((4, 1, 8, 8), np.float32)}, r"no array for model input\(s\) \['image'\].*arrays: \['img'\]"),
    ({"image": np.zeros((4, 1, 8, 8), np.float64)}, "dtype float64; model input 'image' expects float32"),
    ({"image": np.zeros((4, 1, 9, 8), np.float32)}, "dimension 2 must be 8"),
    ({"image": np.zeros((4, 1, 1, 8, 9), np.float32)}, r"each sample must have shape \[1, 1, 8, 8\]"),
    ({"image": np.zeros((4, 64), np.float32)}, "rank 2"),
    ({"image": np.full((4, 1, 8, 8), np.nan, np.float32)}, "NaN/inf"),
    ({"image": [[0.0]]}, "expected a numpy array"),
    ([], "empty list"),
    (42, "must be a .npz path"),
])
def test_bad_calibration_data_is_rejected(workdir, data, match):
    out = workdir / "never.onnx"
    with pytest.raises(QuantizationError, match=match):
        quantize(workdir / "digits.onnx", data, out, progress=False)
    assert not out.exists()


def test_bad_calibration_files(workdir, tmp_path):
    model = workdir / "digits.onnx"
    (tmp_path / "text.npz").write_text("hello")
    np.save(tmp_path / "one.npy", np.zeros((2, 1, 8, 8), np.float32))
    np.savez(tmp_path / "obj.npz", image=np.array([{"a": 1}], dtype=object))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("x")
    cases = [(tmp_path / "text.npz", "not a readable .npz"), (tmp_path / "one.npy", "single .npy array"),
             (tmp_path / "obj.npz", "without unpickling"), (tmp_path / "empty", "contains no .npz files"),
             (tmp_path / "missing.npz", "does not exist")]
    for path, match in cases:
        with pytest.raises(QuantizationError, match=match):
            quantize(model, path, progress=False)


def test_two_input_model_sample_counts_must_agree():
    g = h.make_graph([h.make_node("Add", ["a", "b"], ["c"], name="add")], "two",
                     [h.make_tensor_value_info("a", T.FLOAT, [1, 4]), h.make_tensor_value_info("b", T.FLOAT, [1, 4])],
                     [h.make_tensor_value_info("c", T.FLOAT, [1, 4])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    with pytest.raises(QuantizationError, match="different numbers of samples: a=3, b=2"):
        quantize(m, {"a": np.zeros((3, 1, 4), np.float32), "b": np.zeros((2, 1, 4), np.float32)}, progress=False)
    static4 = h.make_model(h.make_graph(
        [h.make_node("Relu", ["a"], ["c"], name="r")], "s",
        [h.make_tensor_value_info("a", T.FLOAT, [4, 2])], [h.make_tensor_value_info("c", T.FLOAT, [4, 2])]),
        opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    with pytest.raises(QuantizationError, match="not a multiple of the model's static batch size 4"):
        quantize(static4, {"a": np.zeros((6, 2), np.float32)}, progress=False)
    res = quantize(m, {"a": np.ones((3, 1, 4), np.float32), "b": -np.ones((3, 1, 4), np.float32)}, progress=False)
    assert res.report.tensors["a"]["range"] == [0.0, 1.0] and res.report.tensors["b"]["range"] == [-1.0, 0.0]


def test_bad_options_and_models(workdir, digits, int8_minmax):
    model, data = workdir / "digits.onnx", {"image": digits.x_train[:4]}
    with pytest.raises(ConfigError, match="method must be one of"):
        quantize(model, data, method="kl")
    with pytest.raises(ConfigError, match="percentile must be"):
        QuantizationConfig(percentile=30)
    with pytest.raises(ConfigError, match=r"unknown quantization option\(s\) \['bits'\]"):
        quantize(model, data, bits=4)
    with pytest.raises(ConfigError, match="symmetric activations are int8"):
        QuantizationConfig(symmetric=True, activation_type="uint8")
    old = onnx.load(str(model))
    old.opset_import[0].version = 11
    res = quantize(old, data, progress=False)  # ONNX input: upgraded with onnx.version_converter
    assert res.report.opset_upgraded == (11, 13) and res.proto.opset_import[0].version == 13
    with pytest.raises(QuantizationError, match="opset 11; per-channel weights need opset >= 13"):
        quantize(load_onnx(old), data, progress=False)  # an IR model is not converted
    old.opset_import[0].version = 9
    res = quantize(old, data, progress=False, per_channel=False)
    assert res.report.opset_upgraded == (9, 10)
    ints = h.make_model(h.make_graph(
        [h.make_node("Add", ["a", "a"], ["c"], name="add")], "i",
        [h.make_tensor_value_info("a", T.INT64, [2])], [h.make_tensor_value_info("c", T.INT64, [2])]),
        opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    with pytest.raises(QuantizationError, match="no float32 activations to quantize"):
        quantize(ints, {"a": np.zeros((2, 2), np.int64)}, progress=False)
    with pytest.raises(QuantizationError, match="already quantized .*DequantizeLinear"):
        quantize(workdir / "digits_int8.onnx", data, progress=False)
    assert issubclass(QuantizationError, NnrtError)


# -------------------------------------------------------------------- CLI
def test_cli_quantize(workdir, capsys):
    out = workdir / "cli_int8.onnx"
    code = main(["quantize", str(workdir / "digits.onnx"), "--calibration", str(workdir / "calib.npz"),
                 "-o", str(out), "--method", "percentile", "--percentile", "99.9", "--symmetric", "--no-progress"])
    text = capsys.readouterr()
    assert code == 0, text.err
    assert "quantized nodes: 8 of 8" in text.out and "symmetric int8" in text.out and f"wrote {out}" in text.out
    assert "size:" in text.out and text.err == ""
    onnx.checker.check_model(onnx.load(str(out)))
    code = main(["quantize", str(workdir / "digits.onnx"), "--calibration", str(workdir / "calib.npz"),
                 "-o", str(workdir / "cli2.onnx"), "--json", "--per-tensor-weights", "--exclude-node", "fc"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["config"]["per_channel"] is False and "fc" not in data["quantized_nodes"]
    assert data["skipped_nodes"] == {"fc": "excluded by configuration"}


def test_cli_quantize_errors(workdir, tmp_path, capsys):
    bad = tmp_path / "bad.npz"
    np.savez(bad, image=np.zeros((3, 1, 8, 8), np.float64))
    out = tmp_path / "out.onnx"
    code = main(["quantize", str(workdir / "digits.onnx"), "--calibration", str(bad), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "nnrt: error:" in err and "expects float32" in err and not out.exists()
    code = main(["quantize", str(workdir / "digits.onnx"), "--calibration", str(bad), "-o", str(out),
                 "--percentile", "10"])
    assert code == 2 and "percentile must be" in capsys.readouterr().err
