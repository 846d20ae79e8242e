"""Models that ONNX Runtime's own tools write, run on the NumPy backend alone
against raw ONNX Runtime on the same file.

- ``onnxruntime.quantization.quantize_dynamic`` of a float LSTM + MatMul
  model (DynamicQuantizeLSTM, DynamicQuantizeLinear, MatMulInteger), and
  the same file optimized and saved by ONNX Runtime (DynamicQuantizeMatMul);
- ``onnxruntime.transformers.optimizer.optimize_model`` of a small BERT
  (EmbedLayerNormalization, Attention, SkipLayerNormalization, BiasGelu or,
  with the GELU approximation, FastGelu); its output imports no
  ``com.microsoft`` opset, which ONNX Runtime accepts and so must nnrt;
- ONNX Runtime's saved extended-level optimization of the float and of the
  dynamically quantized BERT (FusedMatMul, MatMulIntegerToFloat,
  DynamicQuantizeMatMul, Gelu, SkipLayerNormalization).
"""
from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from bert_like import bert_like
from onnx import TensorProto, helper, numpy_helper

from nnrt_core import ScheduleConfig, Session

quantization = pytest.importorskip("onnxruntime.quantization")
optimizer = pytest.importorskip("onnxruntime.transformers.optimizer")
pytest.importorskip("sympy")  # the transformer optimizer's shape inference needs it

TOL = 1e-5


def _ops(model: onnx.ModelProto) -> collections.Counter:
    return collections.Counter(f"{n.domain}::{n.op_type}" if n.domain else n.op_type for n in model.graph.node)


def _ort_optimized(src: Path, dst: Path) -> Path:
    """``src`` optimized by ONNX Runtime at the extended level and saved (its public option)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(dst)
    ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])
    return dst


def _compare(path: Path | bytes, feeds_list: list[dict[str, np.ndarray]], tol: float = TOL) -> float:
    """Largest error relative to max|ref| of the NumPy backend against raw ORT over the feeds."""
    src = str(path) if isinstance(path, Path) else path
    raw = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    sess = Session(src, ScheduleConfig(backends=["numpy"]))
    assert {p.backend for p in sess.placement_report} == {"numpy"}
    worst = 0.0
    for feeds in feeds_list:
        want = raw.run(None, feeds)
        got = sess.run(feeds)
        for w, g in zip(want, got.values()):
            g = np.asarray(g)
            assert g.shape == w.shape and g.dtype == w.dtype
            worst = max(worst, float(np.abs(g.astype(np.float64) - w).max() / np.abs(w).max()))
    assert worst <= tol, f"max error {worst:.3g} of max|ref| over {tol}"
    return worst


# -- dynamic int8 LSTM ------------------------------------------------------------------------------
def _float_lstm(direction: str, seed: int = 0, inputs: int = 12, hidden: int = 16, outputs: int = 5) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    d = 2 if direction == "bidirectional" else 1
    init = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
            for n, s in (("W", (d, 4 * hidden, inputs)), ("R", (d, 4 * hidden, hidden)), ("B", (d, 8 * hidden)),
                         ("proj", (d * hidden, outputs)))]
    init.append(numpy_helper.from_array(np.array([0, 0, -1], np.int64), "flat"))
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "y_h", "y_c"], hidden_size=hidden, direction=direction),
             helper.make_node("Transpose", ["y"], ["y_t"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["y_t", "flat"], ["y_flat"]),
             helper.make_node("MatMul", ["y_flat", "proj"], ["out"])]
    graph = helper.make_graph(nodes, "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["time", 1, inputs])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["time", 1, outputs])], init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("weight_type", ["QInt8", "QUInt8"])
def test_quantize_dynamic_lstm_model_matches_onnxruntime(tmp_path, direction, weight_type):
    float_path, q_path = tmp_path / "float.onnx", tmp_path / "q.onnx"
    onnx.save(_float_lstm(direction), float_path)
    quantization.quantize_dynamic(float_path, q_path, weight_type=getattr(quantization.QuantType, weight_type))
    ops = _ops(onnx.load(q_path))
    assert ops["com.microsoft::DynamicQuantizeLSTM"] == 1 and ops["MatMulInteger"] == 1
    rng = np.random.default_rng(1)
    feeds = [{"x": rng.standard_normal((t, 1, 12)).astype(np.float32)} for t in (1, 7, 20)]
    _compare(q_path, feeds)
    optimized = _ort_optimized(q_path, tmp_path / "q_opt.onnx")
    assert _ops(onnx.load(optimized))["com.microsoft::DynamicQuantizeMatMul"] == 1
    _compare(optimized, feeds)


# -- BERT through ONNX Runtime's tools --------------------------------------------------------------
def _bert_feeds(lengths: tuple[int, ...] = (3, 9, 16)) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(2)
    feeds = []
    for s in lengths:
        mask = np.ones((2, s), np.int64)
        mask[1, max(1, s // 2):] = 0  # the second sequence right-padded
        feeds.append({"input_ids": rng.integers(0, 40, (2, s)).astype(np.int64), "attention_mask": mask,
                      "token_type_ids": rng.integers(0, 2, (2, s)).astype(np.int64)})
    return feeds


@pytest.mark.parametrize("gelu_approximation", [False, True])
def test_transformer_optimizer_bert_matches_onnxruntime(gelu_approximation):
    from onnxruntime.transformers.fusion_options import FusionOptions

    options = FusionOptions("bert")
    options.enable_gelu_approximation = gelu_approximation
    fused = optimizer.optimize_model(bert_like(), model_type="bert", num_heads=4, hidden_size=32, opt_level=0,
                                     optimization_options=options).model
    ops = _ops(fused)
    gelu = "com.microsoft::FastGelu" if gelu_approximation else "com.microsoft::BiasGelu"
    for op in ("com.microsoft::EmbedLayerNormalization", "com.microsoft::Attention",
               "com.microsoft::SkipLayerNormalization", gelu):
        assert ops[op] >= 1, f"optimizer wrote no {op}: {dict(ops)}"
    assert "com.microsoft" not in {o.domain for o in fused.opset_import}  # ORT implies it; so does nnrt
    _compare(fused.SerializeToString(), _bert_feeds())


@pytest.mark.parametrize("quantized", [False, True])
def test_onnxruntime_saved_optimization_of_bert_matches_onnxruntime(tmp_path, quantized):
    src = tmp_path / "bert.onnx"
    onnx.save(bert_like(), src)
    if quantized:
        q = tmp_path / "bert_q.onnx"
        quantization.quantize_dynamic(src, q, weight_type=quantization.QuantType.QInt8)
        src = q
    optimized = _ort_optimized(src, tmp_path / "bert_opt.onnx")
    ops = _ops(onnx.load(optimized))
    wanted = ["com.microsoft::FusedMatMul"]
    if quantized:
        wanted += ["com.microsoft::MatMulIntegerToFloat", "com.microsoft::DynamicQuantizeMatMul",
                   "com.microsoft::SkipLayerNormalization"]
    for op in wanted:
        assert ops[op] >= 1, f"ONNX Runtime wrote no {op}: {dict(ops)}"
    _compare(optimized, _bert_feeds())
