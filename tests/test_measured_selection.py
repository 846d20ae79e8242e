"""Measured selection (nnrt_core/compiler/measure.py): each engine's plan and
the split are built, timed on the session's input shapes, the fastest kept;
the choice is reported, stored in the model cache, and the default when two
or more real engines are selected.  Emulated backends stay out of "auto"."""
from __future__ import annotations

import numpy as np
import pytest

import nnrt_core.compiler.measure as measure
from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import ConfigError, ExecutionError
from nnrt_core.placement import PlanCandidate
from test_partitioning import X, chain, reference
from test_schedulers import ELEMENTWISE, fp16_engine, registry, timed_backend

from fakes import make_fake_backend


def _engines(slow_delay: float = 0.004, **slow_attrs):
    slow = timed_backend("slow", ELEMENTWISE, delay=slow_delay, priority=100, device_type="cpu")
    fast = timed_backend("fast", ELEMENTWISE, delay=0.0, device_type="cpu")
    slow.emulated = fast.emulated = False  # two real engines
    for k, v in slow_attrs.items():
        setattr(slow, k, v)
    return slow, fast


def test_measured_keeps_the_fastest_plan_and_says_why():
    slow, fast = _engines()
    reg = registry(slow, fast)
    m = chain("Relu", "Neg", "Abs", "Tanh")
    sess = Session(m, ScheduleConfig(backends=["slow", "fast"], backup=None, scheduler="measured"), registry=reg)
    assert set(sess.placement.values()) == {"fast"}
    assert sess.config.backends == ("fast",) and sess.config.scheduler == "priority"  # the plan chosen
    considered = sess.considered_plans
    assert considered[0]["chosen"] and considered[0]["label"] == "fast alone"
    assert all(p["source"] == "measured" for p in considered)
    slow_alone = next(p for p in considered if p["label"] == "slow alone")
    assert slow_alone["estimated_ms"] > 4 * 3 and not slow_alone["chosen"]  # 4 nodes x 4 ms
    split = next(p for p in considered if p["split"])
    assert "placed exactly as 'slow alone'" in split["problem"]  # the priority split put every node on slow
    (event,) = [e for e in sess.events if e.kind == "plan_measured"]
    assert "chose 'fast alone'" in event.message and "slow alone" in event.message
    np.testing.assert_allclose(sess.run(X)["y"], reference(m, X)[0], rtol=1e-6)
    assert "measure" in sess.stats()["build"]


def test_scheduler_auto_measures_with_two_real_engines_and_not_when_turned_off(monkeypatch):
    slow, fast = _engines()
    reg = registry(slow, fast)
    m = chain("Relu", "Neg")
    sess = Session(m, ScheduleConfig(backends=["slow", "fast"], backup=None), registry=reg)
    assert sess.config.scheduler == "priority" and set(sess.placement.values()) == {"fast"}
    assert [e.kind for e in sess.events].count("plan_measured") == 1
    monkeypatch.setenv(measure.MEASURE_ENV, "0")
    static = Session(m, ScheduleConfig(backends=["slow", "fast"], backup=None), registry=reg)
    assert set(static.placement.values()) == {"slow"}  # the documented static order: priority
    assert static.considered_plans == [] and "plan_measured" not in [e.kind for e in static.events]


def test_one_engine_and_the_backup_is_not_measured():
    slow, fast = _engines()
    reg = registry(slow, fast)
    sess = Session(chain("Relu", "Neg"), ScheduleConfig(backends=["slow"], backup="numpy", scheduler="measured"),
                   registry=reg)
    assert set(sess.placement.values()) == {"slow"} and sess.considered_plans == []


def test_emulated_engines_do_not_make_auto_measure():
    slow, fast = _engines(emulated=True)
    reg = registry(slow, fast)
    sess = Session(chain("Relu", "Neg"), ScheduleConfig(backends=["slow", "fast"], backup=None), registry=reg)
    assert set(sess.placement.values()) == {"slow"}  # one real engine: priority, as configured


def test_a_split_must_beat_every_whole_model_plan_by_the_margin():
    def built(label, split):
        return (PlanCandidate(label, [label], "priority", split=split), _Model(), None)

    class _Model:
        steps, partitions, events, considered_plans = [], [], [], []

    plans = [built("a alone", False), built("a+b", True)]
    near = [{"runs": [1.0], "problem": None}, {"runs": [0.98], "problem": None}]
    from nnrt_core.compiler.model import EventLog

    chosen = measure.chosen(plans, near, ScheduleConfig(), EventLog())
    assert chosen is plans[0][1]  # 2 % faster is within the margin: the whole-model plan stays
    plans = [built("a alone", False), built("a+b", True)]
    clear = [{"runs": [1.0], "problem": None}, {"runs": [0.9], "problem": None}]
    assert measure.chosen(plans, clear, ScheduleConfig(), EventLog()) is plans[1][1]


def test_a_plan_that_fails_to_run_is_dropped_with_its_reason():
    def broken(result):
        raise RuntimeError("device lost")

    fast = make_fake_backend("fast", ELEMENTWISE, device_type="cpu", priority=100, output_fault=broken)
    ok = timed_backend("ok", ELEMENTWISE, delay=0.0, device_type="cpu")
    reg = registry(fast, ok)
    sess = Session(chain("Relu", "Neg"), ScheduleConfig(backends=["fast", "ok"], backup=None, scheduler="measured"),
                   registry=reg)
    assert set(sess.placement.values()) == {"ok"}
    failed = next(p for p in sess.considered_plans if p["label"] == "fast alone")
    assert failed["estimated_ms"] is None and "device lost" in failed["problem"]


def test_when_no_plan_runs_on_the_measurement_inputs_the_priority_plan_is_built_and_says_so():
    """Every plan failing on the synthetic inputs says more about the inputs
    than the plans (silero VAD: sample rate 0 takes a branch it cannot run):
    the priority plan is built unmeasured, with the reasons in the event, and
    a run that fails for real raises the engine's error then."""
    def broken(result):
        raise RuntimeError("device lost")

    a = make_fake_backend("a", ELEMENTWISE, device_type="cpu", output_fault=broken)
    b = make_fake_backend("b", ELEMENTWISE, device_type="cpu", output_fault=broken)
    sess = Session(chain("Relu"), ScheduleConfig(backends=["a", "b"], backup=None, scheduler="measured"),
                   registry=registry(a, b))
    (event,) = [e for e in sess.events if e.kind == "plan_measured"]
    assert "without measuring" in event.message and "device lost" in event.message
    assert set(sess.placement.values()) == {"a"}  # the priority order's first engine
    with pytest.raises(ExecutionError, match="device lost"):
        sess.run(X)


def test_no_plan_that_builds_is_a_clear_error():
    a = make_fake_backend("a", ELEMENTWISE, device_type="cpu", priority=100)
    b = make_fake_backend("b", ELEMENTWISE, device_type="cpu")
    with pytest.raises(ConfigError):
        Session(chain("Relu", "Sin"), ScheduleConfig(backends=["a", "b"], backup=None, scheduler="measured"),
                registry=registry(a, b))


def test_a_model_that_runs_on_no_synthetic_input_is_built_unmeasured():
    """``[1, samples]`` reshaped to rows of 480: no free size tried (1, 64,
    1024) fits, real audio of 960 samples does.  Session(path) raised
    ConfigError before."""
    pytest.importorskip("nnrt_onnxruntime")
    pytest.importorskip("nnrt_openvino")
    from onnx import helper, numpy_helper
    from onnx_models import make_model, vi

    shape = numpy_helper.from_array(np.array([-1, 480], np.int64), "shape")
    m = make_model([helper.make_node("Reshape", ["audio", "shape"], ["rows"]), helper.make_node("Relu", ["rows"], ["y"])],
                   [vi("audio", shape=(1, "samples"))], [vi("y", shape=("r", 480))], inits=[shape])
    sess = Session(m.SerializeToString(), ScheduleConfig(backends=["onnxruntime", "openvino"], backup=None,
                                                         scheduler="measured"))
    assert any("without measuring" in e.message for e in sess.events if e.kind == "plan_measured")
    audio = np.linspace(-1, 1, 960, dtype=np.float32)[None]
    np.testing.assert_array_equal(sess.run({"audio": audio})["y"], np.maximum(audio.reshape(2, 480), 0))


def test_the_model_cache_stores_the_choice_and_a_second_process_measures_nothing(tmp_path, monkeypatch):
    pytest.importorskip("nnrt_onnxruntime")
    cfg = ScheduleConfig(backends=["onnxruntime", "numpy"], backup=None, scheduler="measured",
                         cache_dir=str(tmp_path))
    m = chain("Relu", "Neg", "Abs")
    first = Session(m, cfg)
    assert not first.compiled_model.cache_hit and len(first.considered_plans) >= 2
    timed = []
    monkeypatch.setattr(measure, "_time_plans", lambda *a: timed.append(a) or [])
    second = Session(m, cfg)  # a fresh process with the same cache_dir sees the same entry
    assert second.compiled_model.cache_hit and not timed
    assert second.placement == first.placement and second.config.backends == first.config.backends
    assert second.config.scheduler == "priority"  # new input shapes plan the chosen engine, not measure again
    assert second.considered_plans == first.considered_plans  # the report of what was measured survives
    np.testing.assert_allclose(second.run(X)["y"], first.run(X)["y"])


def test_measurement_feeds_follow_the_inputs():
    from nnrt_core import load_model

    g = load_model(chain("Relu")).graph
    feeds = measure.measurement_feeds(g)
    assert set(feeds) == {v.name for v in g.inputs}
    (x,) = feeds.values()
    assert x.dtype == np.float32 and x.shape == X["x"].shape


def test_auto_leaves_the_emulated_npu_out_visibly():
    pytest.importorskip("nnrt_npu_emu")
    sess = Session(chain("Relu", "Neg"))  # backends="auto"
    assert "npu_emu" not in set(sess.placement.values())
    skipped = [e for e in sess.events if e.kind == "backend_skipped"]
    assert skipped and skipped[0].backend == "npu_emu" and "name it in backends" in skipped[0].message
    named = Session(chain("Relu", "Neg"), ScheduleConfig(backends=["npu_emu"], backup="numpy", precision="fp16"))
    assert "npu_emu" in set(named.placement.values())


# --------------------------------------------------------- precision="auto"
def _reduced_engine(error: float, fp32_delay: float = 0.003, ops=ELEMENTWISE):
    """:func:`fp16_engine` whose fp16 plans move every finite output value by
    ``error`` x max|finite output|."""
    def perturbed(out):
        return {k: np.where(np.isfinite(v), v + error * float(np.max(np.abs(v[np.isfinite(v)]))), v).astype(v.dtype)
                for k, v in out.items()}
    return fp16_engine(perturbed, fp32_delay=fp32_delay, ops=ops)


def test_precision_auto_keeps_the_fastest_plan_within_the_tolerance():
    chip = _reduced_engine(error=1e-3)
    sess = Session(chain("Relu", "Neg", "Abs"), ScheduleConfig(backends=["chip"], backup=None, precision="auto"),
                   registry=registry(chip))
    assert sess.config.precision == "fp16"  # the chosen plan's precision, concrete
    plans = {p["label"]: p for p in sess.considered_plans}
    assert plans["chip alone, fp16"]["chosen"] and plans["chip alone, fp16"]["precision"] == "fp16"
    assert 5e-4 < plans["chip alone, fp16"]["max_rel_err"] < 2e-3  # its measured error is reported
    assert plans["chip alone"]["precision"] == "fp32" and plans["chip alone"]["max_rel_err"] == 0.0


def test_precision_auto_never_keeps_a_plan_over_the_tolerance():
    chip = _reduced_engine(error=5e-2)
    m = chain("Relu", "Neg", "Abs")
    sess = Session(m, ScheduleConfig(backends=["chip"], backup=None, precision="auto"), registry=registry(chip))
    assert sess.config.precision == "fp32"
    fp16 = next(p for p in sess.considered_plans if p["precision"] == "fp16")
    assert not fp16["chosen"] and "over precision_tolerance 0.01" in fp16["problem"]
    np.testing.assert_allclose(sess.run(X)["y"], reference(m, X)[0], rtol=1e-6)
    loose = Session(m, ScheduleConfig(backends=["chip"], backup=None, precision="auto", precision_tolerance=0.1),
                    registry=registry(_reduced_engine(error=5e-2)))
    assert loose.config.precision == "fp16"


def test_precision_auto_measures_the_error_over_the_finite_values_of_an_output_with_minus_inf():
    """Log of a Relu is -inf wherever the input is <= 0 (an attention mask's
    -inf is the same): max|ref| is then inf, which made every error 0, and a
    plan 5e-2 off was chosen."""
    chip = _reduced_engine(error=5e-2, ops=ELEMENTWISE + ["Log"])
    sess = Session(chain("Relu", "Log"), ScheduleConfig(backends=["chip"], backup=None, precision="auto"),
                   registry=registry(chip))
    fp16 = next(p for p in sess.considered_plans if p["precision"] == "fp16")
    assert 4e-2 < fp16["max_rel_err"] < 6e-2 and not fp16["chosen"]
    assert sess.config.precision == "fp32"


@pytest.mark.parametrize("got,ref,expected", [
    ([1.0, -np.inf, 2.0], [1.0, -np.inf, 4.0], 0.5),  # the -inf matches: 2 off a finite max of 4
    ([1.0, np.inf, 4.0], [1.0, -np.inf, 4.0], np.inf),  # a non-finite that does not match
    ([1.0, np.nan, 4.0], [1.0, 2.0, 4.0], np.inf),  # NaN where the reference is finite
    ([1.0, np.nan, 4.0], [1.0, np.nan, 4.0], 0.0),
    ([np.inf], [np.inf], 0.0),
    ([[1.0, 2.0]], [1.0, 2.0], np.inf),  # another shape
])
def test_output_error_is_over_the_finite_reference_values(got, ref, expected):
    assert measure.output_error(np.array(got, np.float32), np.array(ref, np.float32)) == expected


def test_precision_auto_with_no_reduced_precision_builds_the_fp32_plan_without_measuring():
    slow, _ = _engines()
    sess = Session(chain("Relu"), ScheduleConfig(backends=["slow"], backup=None, precision="auto"),
                   registry=registry(slow))
    assert sess.config.precision == "fp32" and sess.considered_plans == []
    assert any(e.kind == "plan_measured" and "without measuring" in e.message for e in sess.events)


def test_precision_tolerance_is_checked():
    for bad in (0, 1, -0.1, "0.01", True):
        with pytest.raises(ConfigError, match="precision_tolerance"):
            ScheduleConfig(precision="auto", precision_tolerance=bad)


def _framed_audio_model(window: int = 16):
    """``[1, samples]`` audio (free length) -> Conv with a ``window``-sample kernel, no padding
    (a spectrogram front end): length 1 cannot run on any engine."""
    from onnx import helper, numpy_helper
    from onnx_models import make_model, vi

    w = numpy_helper.from_array(np.hanning(window).astype(np.float32).reshape(1, 1, window), "w")
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [helper.make_node("Unsqueeze", ["audio", "axes"], ["x3"]),
             helper.make_node("Conv", ["x3", "w"], ["frames"], strides=[4]),
             helper.make_node("Relu", ["frames"], ["y"])]
    return make_model(nodes, [vi("audio", shape=(1, "samples"))], [vi("y", shape=(1, 1, "frames"))], inits=[w, axes])


def test_a_model_that_needs_longer_free_dimensions_is_measured_on_longer_inputs():
    """Free dimensions taken as 1 failed every plan of a model whose first
    Conv needs 16 samples (openWakeWord's melspectrogram: 512): the default
    Session raised ConfigError; it now measures with the free dimensions taken
    as 64, says so, and runs."""
    pytest.importorskip("nnrt_onnxruntime")
    pytest.importorskip("nnrt_openvino")
    m = _framed_audio_model()
    sess = Session(m.SerializeToString(), ScheduleConfig(backends=["onnxruntime", "openvino"], backup=None,
                                                         scheduler="measured"))
    notes = [e.message for e in sess.events if e.kind == "plan_measured"]
    assert any("taken as 64" in n for n in notes), notes
    assert any(p["estimated_ms"] is not None for p in sess.considered_plans)
    audio = np.sin(np.arange(400, dtype=np.float32) / 7)[None]
    want = np.maximum(np.convolve(audio[0], np.hanning(16)[::-1].astype(np.float32), "valid")[::4], 0)
    np.testing.assert_allclose(sess.run({"audio": audio})["y"].ravel(), want, rtol=1e-4, atol=1e-5)


def test_a_model_that_runs_on_no_synthetic_input_is_measured_on_the_measure_feeds():
    """The model above (rows of 480 samples) on real engines: with
    ``measure_feeds`` giving 960 samples every plan runs and is timed (no
    "without measuring"), and no engine's error line reaches stderr."""
    pytest.importorskip("nnrt_onnxruntime")
    pytest.importorskip("nnrt_openvino")
    from onnx import helper, numpy_helper
    from onnx_models import make_model, vi

    shape = numpy_helper.from_array(np.array([-1, 480], np.int64), "shape")
    m = make_model([helper.make_node("Reshape", ["audio", "shape"], ["rows"]), helper.make_node("Relu", ["rows"], ["y"])],
                   [vi("audio", shape=(1, "samples"))], [vi("y", shape=("r", 480))], inits=[shape])
    audio = np.linspace(-1, 1, 960, dtype=np.float32)[None]
    sess = Session(m.SerializeToString(), ScheduleConfig(backends=["onnxruntime", "openvino"], backup=None,
                                                         scheduler="measured", measure_feeds={"audio": audio}))
    notes = [e.message for e in sess.events if e.kind == "plan_measured"]
    assert not any("without measuring" in n for n in notes) and any("measure_feeds given" in n for n in notes)
    timed = [p for p in sess.considered_plans if p["estimated_ms"] is not None]
    assert {p["label"] for p in timed} >= {"onnxruntime alone", "openvino alone"}
    np.testing.assert_array_equal(sess.run({"audio": audio})["y"], np.maximum(audio.reshape(2, 480), 0))


def test_candidate_runs_on_synthetic_inputs_are_quiet(capfd):
    """Every plan of the model fails on the synthetic inputs: ORT's error
    lines for those runs stay off stderr (``RunControl(quiet=True)``)."""
    pytest.importorskip("nnrt_onnxruntime")
    from onnx import helper, numpy_helper
    from onnx_models import make_model, vi

    shape = numpy_helper.from_array(np.array([-1, 480], np.int64), "shape")
    m = make_model([helper.make_node("Reshape", ["audio", "shape"], ["rows"], name="rows480")],
                   [vi("audio", shape=(1, "samples"))], [vi("rows", shape=("r", 480))], inits=[shape])
    capfd.readouterr()
    sess = Session(m.SerializeToString(), ScheduleConfig(backends=["onnxruntime", "numpy"], backup=None,
                                                         scheduler="measured"))
    assert any("without measuring" in e.message for e in sess.events if e.kind == "plan_measured")
    assert "rows480" not in capfd.readouterr().err
