"""Thread budgets: streams and the run_async pool give each run its share of
the cores; the ONNX Runtime backend runs a request on a session with that
many intra-op threads, sharing the partition's weights."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core import ScheduleConfig, Session
from nnrt_core.backend import CompiledPartition
from nnrt_core.runtime.thread_budget import CORES, share_of_cores, thread_budget, use_thread_budget

from conftest import make_registry
from fakes import fake_plugin, make_fake_backend


def test_budget_is_unset_by_default_and_scoped():
    assert thread_budget() is None
    with use_thread_budget(3):
        assert thread_budget() == 3
        with use_thread_budget(1):
            assert thread_budget() == 1
        assert thread_budget() == 3
    assert thread_budget() is None
    seen = []
    with use_thread_budget(2):  # per thread: another thread does not see it
        t = threading.Thread(target=lambda: seen.append(thread_budget()))
        t.start()
        t.join()
    assert seen == [None]


def test_share_of_cores_splits_the_cores_and_never_gives_zero():
    assert share_of_cores(1) == CORES
    assert share_of_cores(CORES) == 1
    assert share_of_cores(4 * CORES) == 1
    assert share_of_cores(0) == CORES


def _relu_model():
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


class _Recorder:
    """Wraps every partition of a session to record the budget each run saw
    and the budgets it was asked to prepare."""

    def __init__(self, sess: Session) -> None:
        self.seen: list[int | None] = []
        self.prepared: list[int] = []
        for st in sess.executor.steps:
            real_run = st.compiled.run
            st.compiled.run = self._run(real_run)
            st.compiled.prepare_thread_budget = self.prepared.append

    def _run(self, real_run):
        def run(inputs, **control):
            self.seen.append(thread_budget())
            return real_run(inputs, **control)
        return run


def test_streams_and_run_async_give_each_run_its_share_and_plain_runs_none():
    Fake = make_fake_backend("fakecpu", {"Relu"})
    sess = Session(_relu_model(), ScheduleConfig(backends=["fakecpu"]), registry=make_registry(fake_plugin(Fake)))
    rec = _Recorder(sess)
    x = np.array([-1.0, 2.0], np.float32)
    sess.run({"x": x})
    assert rec.seen == [None]
    rec.seen.clear()
    with sess.stream(max_in_flight=3, concurrency=3) as stream:
        for _ in range(6):
            stream.submit({"x": x})
        stream.wait_all()
    assert rec.seen == [share_of_cores(3)] * 6
    assert rec.prepared == [share_of_cores(3)]
    rec.seen.clear()
    rec.prepared.clear()
    with sess.stream(max_in_flight=2, concurrency=1) as stream:
        stream.submit({"x": x})
        stream.wait_all()
    assert rec.seen == [CORES]
    rec.seen.clear()
    rec.prepared.clear()
    with sess.stream(max_in_flight=4) as stream:  # auto: every level the tuner may try is prepared
        stream.wait_all()
    assert sorted(rec.prepared) == sorted({share_of_cores(k) for k in stream.tuner.levels})
    assert sess.run_async({"x": x}).result()["y"].tolist() == [0.0, 2.0]
    assert rec.seen == [CORES]  # alone in the pool: every core


def test_base_partition_prepare_is_a_no_op():
    assert CompiledPartition.prepare_thread_budget(object(), 1) is None  # type: ignore[arg-type]


# ------------------------------------------------------------ onnxruntime
ort = pytest.importorskip("onnxruntime")


def _conv_model():
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((16, 8, 3, 3)).astype(np.float32), "w")  # 4.6 KB
    b = numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b")  # inline (small)
    g = helper.make_graph([helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                           helper.make_node("Relu", ["c"], ["y"], name="relu")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 6, 6])], [w, b])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _ort_partition(sess: Session):
    (step,) = sess.executor.steps
    return step.compiled


def test_onnxruntime_runs_a_budget_on_a_session_with_that_many_threads():
    x = np.random.default_rng(1).standard_normal((1, 8, 6, 6)).astype(np.float32)
    sess = Session(_conv_model(), ScheduleConfig(backends=["onnxruntime"]))
    part = _ort_partition(sess)
    assert part.describe()["adaptive_threads"] is True
    ref = sess.run({"x": x})["y"]
    assert part._by_threads == {}  # no budget: the default session
    with use_thread_budget(1):
        got = sess.run({"x": x})["y"]
    if CORES > 1:
        assert set(part._by_threads) == {1}
    np.testing.assert_array_equal(got, ref)
    with use_thread_budget(CORES):
        sess.run({"x": x})
    assert set(part._by_threads) <= {1}  # a full budget never makes a session
    # a stream prepares the sessions it will use before its first request
    fresh = Session(_conv_model(), ScheduleConfig(backends=["onnxruntime"]))
    with fresh.stream(max_in_flight=2, concurrency=2) as stream:
        if CORES > 1:
            assert set(_ort_partition(fresh)._by_threads) == {share_of_cores(2)}
        futs = [stream.submit({"x": x}) for _ in range(4)]
        stream.wait_all()
    for f in futs:
        np.testing.assert_array_equal(f.result()["y"], ref)


def test_onnxruntime_threads_fixed_by_the_user_are_kept():
    sess = Session(_conv_model(), ScheduleConfig(backends=["onnxruntime"], num_threads=1))
    part = _ort_partition(sess)
    assert part.describe()["adaptive_threads"] is False
    part.prepare_thread_budget(1)
    with use_thread_budget(1):
        sess.run({"x": np.zeros((1, 8, 6, 6), np.float32)})
    assert part._by_threads == {}


def test_onnxruntime_partition_keeps_large_weights_out_of_the_model_bytes(tmp_path):
    x = np.random.default_rng(2).standard_normal((1, 8, 6, 6)).astype(np.float32)
    sess = Session(_conv_model(), ScheduleConfig(backends=["onnxruntime"]))
    part = _ort_partition(sess)
    assert part._weights.names == ["w"]  # the 576-byte bias stays inline
    assert len(part._model) < 16 * 8 * 3 * 3 * 4  # the weights are not in the protobuf
    ref = sess.run({"x": x})["y"]
    # an offline file carries them in its weights region and loads without the source model
    sess.save(tmp_path / "conv.nnrt")
    loaded = Session(tmp_path / "conv.nnrt")
    np.testing.assert_array_equal(loaded.run({"x": x})["y"], ref)
    np.testing.assert_array_equal(_ort_partition(loaded)._weights.arrays[0],
                                  numpy_helper.to_array(_conv_model().graph.initializer[0]))
