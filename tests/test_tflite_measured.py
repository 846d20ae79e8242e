"""TFLite models take the path ONNX files take: ``Session(model.tflite)`` with
no config measures the plans of the real engines installed (ONNX Runtime and
OpenVINO) and keeps the fastest; every candidate computes the imported graph
(NCHW convolutions, QDQ of int8 tensors, fp16 weights made float32) and
matches the LiteRT interpreter.  Models are written in code."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytest.importorskip("tflite")
pytest.importorskip("ai_edge_litert")
if not (importlib.util.find_spec("nnrt_openvino") and importlib.util.find_spec("nnrt_onnxruntime")):
    pytest.skip("needs the ONNX Runtime and OpenVINO backends", allow_module_level=True)

from test_tflite_quant import int8_conv_model  # noqa: E402
from tflite_models import TFLiteWriter, litert_run, mobilenet_like  # noqa: E402

from nnrt_core import ScheduleConfig, Session  # noqa: E402

ENGINES = {"onnxruntime alone", "openvino alone"}


def _measured(sess: Session) -> dict[str, dict]:
    """The considered plans by label; the session's build was a measured one."""
    (event,) = [e for e in sess.events if e.kind == "plan_measured"]
    assert "measured plans on the session's input shapes" in event.message
    return {p["label"]: p for p in sess.considered_plans}


def _rel(got: np.ndarray, ref: np.ndarray) -> float:
    a, b = got.astype(np.float64), ref.astype(np.float64)
    return float(np.abs(a - b).max()) / max(float(np.abs(b).max()), 1e-30)


@pytest.mark.parametrize("fp16", [False, True])
def test_default_session_of_a_tflite_cnn_measures_both_engines(fp16):
    model = mobilenet_like(32, width=8, blocks=3, classes=10, fp16=fp16)
    feed = np.random.default_rng(1).uniform(-1, 1, (1, 32, 32, 3)).astype(np.float32)
    ref = litert_run(model, [feed])[0]
    sess = Session(model)
    plans = _measured(sess)
    assert ENGINES <= set(plans)
    for label in ENGINES:  # each engine built, ran and was timed on the whole imported graph
        p = plans[label]
        assert p["problem"] is None and p["runs"] > 0 and p["estimated_ms"] > 0, p
        assert p["max_rel_err"] is not None and p["max_rel_err"] <= 1e-5, p
    chosen = next(p for p in sess.considered_plans if p["chosen"])
    assert chosen["label"] in ENGINES and sess.config.precision == "fp32"
    assert {r.backend for r in sess.placement_report} == {chosen["backends"][0]}
    assert _rel(sess.run({"input": feed})["probs"], ref) <= 1e-5


@pytest.mark.parametrize("engine", ["onnxruntime", "openvino"])
def test_each_engine_runs_the_imported_cnn_without_the_backup(engine):
    """The measured candidates are these plans: every node of the import on the engine."""
    model = mobilenet_like(32, width=8, blocks=3, classes=10, fp16=True)
    feed = np.random.default_rng(2).uniform(-1, 1, (1, 32, 32, 3)).astype(np.float32)
    sess = Session(model, ScheduleConfig(backends=[engine], scheduler="priority"))
    assert {r.backend for r in sess.placement_report} == {engine}
    ops = {r.op_type for r in sess.placement_report}
    assert {"Conv", "Transpose", "Gemm", "Softmax"} <= ops  # depthwise and pointwise convs, the input transpose
    assert _rel(sess.run({"input": feed})["probs"], litert_run(model, [feed])[0]) <= 1e-5


@pytest.mark.parametrize("float_io", [True, False])
def test_default_session_of_an_int8_tflite_model_measures_both_engines(float_io):
    model, feed, step = int8_conv_model(float_io)
    ref = litert_run(model, [feed])[0]
    sess = Session(model)
    plans = _measured(sess)
    for label in ENGINES:
        assert plans[label]["problem"] is None and plans[label]["runs"] > 0, plans[label]
    chosen = next(p for p in sess.considered_plans if p["chosen"])
    assert {r.backend for r in sess.placement_report} == {chosen["backends"][0]}
    got = list(sess.run({"x": feed}).values())[0]
    assert got.dtype == ref.dtype
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64)).max()
    assert diff <= (1.01 * step if float_io else 1)


def test_measured_choice_of_a_tflite_model_is_stored_in_the_cache(tmp_path):
    w = TFLiteWriter()
    x = w.input("x", [1, 8, 8, 4])
    y = w.tensor("y", [1, 8, 8, 4])
    w.op("DEPTHWISE_CONV_2D", [x, w.const("k", np.full((1, 3, 3, 4), 0.1, np.float32)),
                                w.const("b", np.zeros(4, np.float32))], [y], "DepthwiseConv2DOptions",
         Padding=0, StrideW=1, StrideH=1, DepthMultiplier=1, DilationWFactor=1, DilationHFactor=1)
    w.outputs = [y]
    model = w.build()
    first = Session(model, ScheduleConfig(cache_dir=str(tmp_path)))
    _measured(first)
    again = Session(model, ScheduleConfig(cache_dir=str(tmp_path)))
    assert again.compiled_model.cache_hit
    assert {r.backend for r in again.placement_report} == {r.backend for r in first.placement_report}
    feed = np.random.default_rng(3).standard_normal((1, 8, 8, 4)).astype(np.float32)
    assert _rel(again.run({"x": feed})["y"], litert_run(model, [feed])[0]) <= 1e-5
