"""The ONNX Runtime partition's warm-up at build (nnrt_onnxruntime.warmup,
docs/plugins.md): a heap prefault by default; with ``warm_up="run"`` runs on
zeros when every input shape is static, skipped with a log otherwise,
failures logged, the first real run's outputs unchanged."""
from __future__ import annotations

import logging
import time

import numpy as np
import pytest
from onnx import TensorProto, helper

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("nnrt_onnxruntime")

from nnrt_core import ScheduleConfig, Session, load_model  # noqa: E402
from nnrt_core.backend import CompileOptions  # noqa: E402
from nnrt_core.errors import CompileError, ConfigError, NnrtError  # noqa: E402
from nnrt_core.registry import Registry  # noqa: E402
from nnrt_core import background  # noqa: E402
from nnrt_onnxruntime import warmup  # noqa: E402
from nnrt_onnxruntime.partition import OrtPartition  # noqa: E402


def _model(shape=(4, 8), idx_shape=(3,)):
    """y = Relu(MatMul(x, w)) + 1; z = Gather(y, idx) (an int64 input)."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 5], np.linspace(-1, 1, 40, dtype=np.float32))
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Relu", ["m"], ["r"], name="relu"),
             helper.make_node("Add", ["r", "one"], ["y"], name="add"),
             helper.make_node("Gather", ["y", "idx"], ["z"], name="gather", axis=0)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape)),
                                       helper.make_tensor_value_info("idx", TensorProto.INT64, list(idx_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [shape[0], 5]),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, [idx_shape[0], 5])], [w, one])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _config(**opts) -> ScheduleConfig:
    return ScheduleConfig(backends=["onnxruntime"], backup=None, backend_options={"onnxruntime": opts})


def _feeds():
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    return {"x": x, "idx": np.array([3, 0, 2], np.int64)}


@pytest.fixture
def runs(monkeypatch):
    """Feeds of every OrtPartition run, in order (``run_with_options``: warm-up and
    controlled runs; the ``direct_run`` closure: a session's plain runs)."""
    seen: list[dict] = []
    real, real_direct = OrtPartition.run_with_options, OrtPartition.direct_run

    def spy(self, inputs, ro):
        seen.append({k: np.array(v, copy=True) for k, v in inputs.items()})
        return real(self, inputs, ro)

    def spy_direct(self, outputs):
        run = real_direct(self, outputs)

        def spied(inputs):
            seen.append({k: np.array(v, copy=True) for k, v in inputs.items()})
            return run(inputs)
        return None if run is None else spied

    monkeypatch.setattr(OrtPartition, "run_with_options", spy)
    monkeypatch.setattr(OrtPartition, "direct_run", spy_direct)
    return seen


@pytest.mark.parametrize("pattern, want", [(None, 2), (True, 2), (False, 1)])
def test_static_partition_is_run_on_zeros_at_build(runs, pattern, want):
    opts = {"warm_up": "run"} if pattern is None else {"warm_up": "run", "enable_mem_pattern": pattern}
    sess = Session(_model(), _config(**opts))
    assert len(runs) == want  # twice with ORT's memory pattern on: its second run allocates the pattern's block
    assert sess.partitions[0].details["enable_mem_pattern"] is (pattern is not False)  # ORT's default: on
    for feed in runs:
        assert set(feed) == {"x", "idx"}
        assert feed["x"].shape == (4, 8) and feed["x"].dtype == np.float32 and not feed["x"].any()
        assert feed["idx"].shape == (3,) and feed["idx"].dtype == np.int64 and not feed["idx"].any()
    assert sess.partitions[0].details["warmed_up"] == "run"
    sess.run(_feeds())
    assert len(runs) == want + 1


@pytest.mark.parametrize("how", [True, "heap", "run", False])
def test_first_real_run_is_unchanged_by_the_warm_up(how):
    feeds = _feeds()
    got = Session(_model(), _config(warm_up=how)).run(feeds)
    ref = ort.InferenceSession(_model().SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for name, want in zip(["y", "z"], ref):
        np.testing.assert_array_equal(got[name], want)


def test_warm_up_false_skips_it(runs):
    sess = Session(_model(), _config(warm_up=False))
    assert runs == [] and "warmed_up" not in sess.partitions[0].details


@pytest.mark.parametrize("value", ["yes", 1, 0, None, "off", {"batch": 1}])
def test_warm_up_option_is_validated(value):
    want = "'warm_up' must be true, false, 'heap' or 'run', got"
    with pytest.raises(ConfigError, match=want):
        warmup.mode({"warm_up": value})
    backend = Registry().backend("onnxruntime").backend
    with pytest.raises(CompileError, match=want):
        backend.compile(load_model(_model()).graph, CompileOptions(extra={"warm_up": value}))
    with pytest.raises(NnrtError, match=want):  # as every bad onnxruntime option
        Session(_model(), _config(warm_up=value))


def test_warm_up_modes():
    assert [warmup.mode(x) for x in ({}, None, {"warm_up": True}, {"warm_up": "heap"}, {"warm_up": "run"},
                                     {"warm_up": False})] == ["heap", "heap", "heap", "heap", "run", "off"]


def test_free_dimensions_skip_the_run_with_a_log(runs, caplog):
    caplog.set_level(logging.INFO, logger="nnrt.onnxruntime")
    sess = Session(_model(shape=("batch", 8)), _config(warm_up="run"))
    assert runs == [] and sess.partitions[0].details["warmed_up"] in ("heap", "none")  # "none": tuning off
    assert "no warm-up run: input 'x' has free dimensions" in caplog.text and "input_shapes" in caplog.text
    # fixed with input_shapes, it warms up at the real shape
    runs.clear()
    cfg = ScheduleConfig(backends=["onnxruntime"], backup=None, input_shapes={"x": [4, 8]},
                         backend_options={"onnxruntime": {"warm_up": "run"}})
    sess = Session(_model(shape=("batch", 8)), cfg)
    assert [f["x"].shape for f in runs] == [(4, 8), (4, 8)]  # twice: the memory pattern is on (ORT's default)
    np.testing.assert_array_equal(sess.run(_feeds())["z"], sess.run(_feeds())["z"])


HEAP_CALLS = ["tune", ("async", warmup.HEAP_BYTES), "tune", warmup.HEAP_BYTES]  # begun at select, awaited at warm-up


@pytest.mark.parametrize("shape, how, want_calls, want_runs, done", [
    ((4, 8), True, HEAP_CALLS, 0, "heap"),  # the default: a prefault, static or not
    (("batch", 8), "heap", HEAP_CALLS, 0, "heap"),
    ((4, 8), "run", ["tune"], 2, "run"),  # runs on the tuned allocator, no prefault (twice: ORT's memory pattern)
    (("batch", 8), "run", ["tune", warmup.HEAP_BYTES], 0, "heap"),  # no run possible: the prefault
    (("batch", 8), False, [], 0, None),
])
def test_what_each_mode_does(monkeypatch, runs, shape, how, want_calls, want_runs, done):
    calls = []
    monkeypatch.setattr(warmup, "tune_allocator", lambda: calls.append("tune") or True)
    monkeypatch.setattr(warmup, "prefault_heap", lambda n: calls.append(n) or True)
    monkeypatch.setattr(warmup, "prefault_heap_async", lambda n: calls.append(("async", n)) or True)
    sess = Session(_model(shape=shape), _config(warm_up=how))
    assert calls == want_calls and len(runs) == want_runs
    assert sess.partitions[0].details.get("warmed_up") == done


def test_no_prefault_when_the_allocator_is_not_tuned(monkeypatch, runs):
    calls = []
    monkeypatch.setattr(warmup, "tune_allocator", lambda: False)  # NNRT_NUMPY_MALLOC_TUNING=0, not glibc
    monkeypatch.setattr(warmup, "prefault_heap", lambda n: calls.append(n) or True)
    assert Session(_model(), _config()).partitions[0].details["warmed_up"] == "none" and calls == []


def test_a_failing_warm_up_is_logged_and_the_session_works(monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="nnrt.onnxruntime")
    real = OrtPartition.run_with_options

    def fail_on_zeros(self, inputs, ro):
        if not inputs["x"].any():
            raise RuntimeError("zeros are not valid here")
        return real(self, inputs, ro)

    monkeypatch.setattr(OrtPartition, "run_with_options", fail_on_zeros)
    sess = Session(_model(), _config(warm_up="run"))
    assert sess.partitions[0].details["warmed_up"] in ("heap", "none")  # the fallback
    assert "warm-up run on zeros (x [4, 8], idx [3]) failed: RuntimeError: zeros are not valid" in caplog.text
    feeds = _feeds()
    np.testing.assert_array_equal(sess.run(feeds)["y"], np.maximum(feeds["x"] @ np.linspace(-1, 1, 40, dtype=np.float32)
                                                                    .reshape(8, 5), 0) + 1)


def test_a_real_ort_failure_on_zeros_is_logged_not_printed(capfd, caplog):
    """Expand to a shape input of zeros is invalid for ORT: logged at info, ORT's own error log silenced."""
    caplog.set_level(logging.INFO, logger="nnrt.onnxruntime")
    g = helper.make_graph([helper.make_node("Expand", ["x", "s"], ["y"], name="expand")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    sess = Session(m, _config(warm_up="run"))
    assert sess.partitions[0].details["warmed_up"] in ("heap", "none")
    assert "warm-up run on zeros" in caplog.text and "failed: " in caplog.text and "; skipped" in caplog.text
    assert "Expand" not in capfd.readouterr().err
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(sess.run({"x": x, "s": np.array([2, 3], np.int64)})["y"], x)


def test_a_warm_up_run_that_does_not_end_is_terminated(caplog):
    """A Loop of 2**62 trips whatever its (zero) input: stopped at RUN_LIMIT_S, logged, the session works."""
    caplog.set_level(logging.INFO, logger="nnrt.onnxruntime")
    body = helper.make_graph([helper.make_node("Add", ["acc", "one"], ["acc_out"], name="inc"),
                              helper.make_node("Identity", ["cond"], ["cond_out"], name="keep")], "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                              helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("acc", TensorProto.FLOAT, [1])],
                             [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [1])],
                             [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])])
    g = helper.make_graph([helper.make_node("Loop", ["trips", "go", "x"], ["y"], name="loop", body=body)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
                          [helper.make_tensor("trips", TensorProto.INT64, [], [2 ** 62]),
                           helper.make_tensor("go", TensorProto.BOOL, [], [True])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    t0 = time.perf_counter()
    sess = Session(m, _config(warm_up="run"))
    assert time.perf_counter() - t0 < warmup.RUN_LIMIT_S + 5
    assert sess.partitions[0].details["warmed_up"] in ("heap", "none")
    assert f"stopped after {warmup.RUN_LIMIT_S} s; skipped" in caplog.text
    with pytest.raises(NnrtError):
        sess.run({"x": np.zeros(1, np.float32)}, timeout=0.2)


class _Arg:
    def __init__(self, name, type, shape):
        self.name, self.type, self.shape = name, type, shape


def test_zero_feeds_cover_strings_and_refuse_what_they_cannot_make():
    feeds, what = warmup.zero_feeds([_Arg("s", "tensor(string)", [2]), _Arg("b", "tensor(bool)", [1, 2])])
    assert feeds["s"].tolist() == ["", ""] and feeds["b"].dtype == np.bool_ and what == "s [2], b [1, 2]"
    assert warmup.zero_feeds([_Arg("q", "seq(tensor(float))", None)]) == (
        None, "input 'q' has type seq(tensor(float)), which a zero feed cannot be made for")
    assert warmup.zero_feeds([_Arg("h", "tensor(bfloat16)", [2])])[0] is None
    assert warmup.zero_feeds([_Arg("w", "tensor(float)", [2])], skip=["w"]) == ({}, "")
    big, why = warmup.zero_feeds([_Arg("x", "tensor(float)", [1024, 1024]), _Arg("y", "tensor(float)", [8])],
                                 max_bytes=4 << 20)
    assert big is None and "exceed 4194304 bytes (input 'y' [8])" in why


@pytest.mark.parametrize("opts, started", [
    ({}, True), ({"warm_up": "heap"}, True), ({"providers": ["CPUExecutionProvider"]}, True),
    ({"warm_up": "run"}, False), ({"warm_up": False}, False), ({"warm_up": "bogus"}, False),
    ({"providers": ["CUDAExecutionProvider", "CPUExecutionProvider"]}, False), ({"providers": 7}, False),
])
def test_the_heap_prefault_starts_when_the_build_selects_the_backend(monkeypatch, opts, started):
    calls = []
    monkeypatch.setattr(warmup, "tune_allocator", lambda: True)
    monkeypatch.setattr(warmup, "prefault_heap_async", lambda n: calls.append(n) or True)
    backend = Registry().backend("onnxruntime").backend
    if backend.device_type != "cpu":
        pytest.skip("the default onnxruntime device is not the CPU here")
    backend.prepare_build(opts)  # never raises: a bad option is the compile's to report
    assert calls == ([warmup.HEAP_BYTES] if started else [])


@pytest.mark.parametrize("opts, setup", [({}, True), ({"warm_up": "run"}, True), ({"warm_up": False}, False),
                                         ({"warm_up": "bogus"}, False)])
def test_ort_setup_session_runs_once_per_process_on_a_thread(monkeypatch, opts, setup):
    made = []
    monkeypatch.setattr(warmup, "_setup", None)
    monkeypatch.setattr(warmup, "_tiny_session", lambda: made.append(1))
    monkeypatch.setattr(warmup, "begin_heap", lambda cpu: False)
    warmup.begin_build(opts, True)
    background.wait_all()
    assert made == ([1] if setup else [])
    if setup:
        assert warmup._setup.name == "nnrt-ort-setup" and not warmup._setup.is_alive()
        assert not warmup.begin_ort_setup() and made == [1]  # once per process


def test_the_ort_setup_session_builds(caplog):
    caplog.set_level(logging.DEBUG, logger="nnrt.onnxruntime")
    warmup._tiny_session()  # a real one-node session; a failure would only be logged
    assert "set-up session failed" not in caplog.text
