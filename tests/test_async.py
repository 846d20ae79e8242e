"""Session.run_async, Stream and running one session from many threads."""
from __future__ import annotations

import threading
import time
from concurrent.futures import CancelledError, wait

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import ConfigError, ExecutionError, InputError, NnrtError
from nnrt_core.runtime.streams import Completion, RunFuture, RunPool, Stream

NUMPY = ScheduleConfig(backends=["numpy"])


def small_cnn(batch: int | str = "n"):
    """Conv -> Relu -> MaxPool -> Reshape -> MatMul -> Softmax; a symbolic
    batch exercises the kernels' per-shape caches (conv plans, pool geometry,
    reshape)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    fc = numpy_helper.from_array(rng.standard_normal((64, 5)).astype(np.float32), "fc")
    shape = numpy_helper.from_array(np.array([0, -1], np.int64), "shape")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["p", "shape"], ["f"], name="flatten"),
        helper.make_node("MatMul", ["f", "fc"], ["l"], name="fc"),
        helper.make_node("Softmax", ["l"], ["y"], name="softmax", axis=-1),
    ]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 5])], [w, fc, shape])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m


def pairs_model():
    """Reshape to [2, -1]: fails at run time for an odd number of elements."""
    shape = numpy_helper.from_array(np.array([2, -1], np.int64), "shape")
    g = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"], name="pairs")], "pairs",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, None])], [shape])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def batches(count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [rng.standard_normal((1 + i % 3, 3, 8, 8)).astype(np.float32) for i in range(count)]


class Gate:
    """Wraps a session's executor so runs block until released, counting how
    many are inside at once."""

    def __init__(self, sess: Session) -> None:
        self.inner = sess.executor.run
        self.release = threading.Event()
        self.started = threading.Semaphore(0)
        self.lock = threading.Lock()
        self.active = 0
        self.peak = 0
        sess.executor.run = self  # type: ignore[method-assign]

    def __call__(self, feeds, *args):
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        self.started.release()
        try:
            assert self.release.wait(10), "gate never opened"
            return self.inner(feeds, *args)
        finally:
            with self.lock:
                self.active -= 1


# ---------------------------------------------------------------- threads
@pytest.mark.parametrize("backend", ["numpy", "onnxruntime"])
def test_run_from_many_threads_matches_serial_runs(backend):
    if backend == "onnxruntime":
        pytest.importorskip("onnxruntime")
    sess = Session(small_cnn(), ScheduleConfig(backends=[backend]))
    xs = batches(24)
    expected = [sess.run({"x": x})["y"] for x in xs]
    got: dict[int, np.ndarray] = {}
    barrier = threading.Barrier(6)

    def worker(k: int) -> None:
        barrier.wait()
        for i in range(k, len(xs), 6):
            got[i] = sess.run({"x": xs[i]})["y"]

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, y in enumerate(expected):
        np.testing.assert_array_equal(got[i], y)


def test_multi_partition_session_is_thread_safe():
    pytest.importorskip("onnxruntime")
    sess = Session(small_cnn(), ScheduleConfig(backends=["onnxruntime"], pins={"pool": "numpy", "softmax": "numpy"}))
    assert len(sess.partitions) >= 3
    xs = batches(12)
    expected = [sess.run({"x": x})["y"] for x in xs]
    futures = [sess.run_async({"x": x}) for x in xs]
    for f, y in zip(futures, expected):
        np.testing.assert_allclose(f.result(timeout=30)["y"], y, rtol=1e-6)


# -------------------------------------------------------------- run_async
def test_run_async_returns_the_outputs_of_run():
    sess = Session(small_cnn(), NUMPY)
    x = batches(1)[0]
    fut = sess.run_async({"x": x})
    assert isinstance(fut, RunFuture)
    np.testing.assert_array_equal(fut.result(timeout=10)["y"], sess.run({"x": x})["y"])
    only = sess.run_async({"x": x}, output_names=["y"]).result(timeout=10)
    assert list(only) == ["y"]


def test_run_async_delivers_errors_through_the_future():
    sess = Session(pairs_model(), NUMPY)
    bad_feed = sess.run_async({"nope": np.zeros(2, np.float32)})
    assert isinstance(bad_feed.exception(timeout=10), InputError)
    assert "unknown input(s) ['nope']" in str(bad_feed.exception())
    failing = sess.run_async({"x": np.zeros(3, np.float32)})
    err = failing.exception(timeout=10)
    assert isinstance(err, NnrtError) and "pairs" in str(err)
    unknown_output = sess.run_async({"x": np.zeros(4, np.float32)}, output_names=["zz"])
    assert isinstance(unknown_output.exception(timeout=10), InputError)
    # the session is still usable
    np.testing.assert_array_equal(sess.run_async({"x": np.arange(4, dtype=np.float32)}).result(timeout=10)["y"],
                                  [[0, 1], [2, 3]])


def test_cancel_pending_and_running_requests_keeps_session_usable():
    sess = Session(small_cnn(), NUMPY)
    x = batches(1)[0]
    gate = Gate(sess)
    workers = sess.run_pool().workers
    running = [sess.run_async({"x": x}) for _ in range(workers)]
    for _ in range(workers):
        assert gate.started.acquire(timeout=10)
    queued = sess.run_async({"x": x})
    assert running[0].running()
    assert queued.cancel() and queued.cancelled()  # never starts
    assert running[0].cancel()  # cancelled mid-run: result() fails at once
    with pytest.raises(CancelledError):
        running[0].result(timeout=0)
    assert running[0].cancel_requested_while_running
    assert running[0] in wait([running[0]], timeout=1).done  # waiters are told too
    gate.release.set()
    expected = gate.inner({"x": x})[0]
    for f in running[1:]:
        np.testing.assert_array_equal(f.result(timeout=10)["y"], expected)
    assert running[0].cancelled()
    np.testing.assert_array_equal(sess.run_async({"x": x}).result(timeout=10)["y"], expected)
    assert gate.peak <= workers


def test_run_pool_rejects_bad_worker_counts_and_reports_shutdown():
    with pytest.raises(ConfigError, match="positive integer"):
        RunPool(lambda f, o: {}, 0)
    pool = RunPool(lambda feeds, names: {"y": feeds["x"] * 2}, 1)
    assert pool.submit({"x": np.ones(2)}).result(timeout=10)["y"].tolist() == [2, 2]
    pool.shutdown()
    assert isinstance(pool.submit({"x": np.ones(2)}).exception(timeout=10), ExecutionError)


# ----------------------------------------------------------------- streams
def test_stream_delivers_every_result_with_userdata_in_completion_order():
    sess = Session(small_cnn(), NUMPY)
    xs = batches(10)
    seen: list[Completion] = []
    with sess.stream(max_in_flight=3, callback=seen.append) as stream:
        futures = [stream.submit({"x": x}, userdata=("req", i)) for i, x in enumerate(xs)]
        assert stream.wait_all(timeout=30) == []  # a callback stream returns nothing
    assert sorted(c.index for c in seen) == list(range(10))
    for c in seen:
        assert c.ok and c.userdata == ("req", c.index) and c.seconds > 0
        np.testing.assert_array_equal(c.outputs["y"], sess.run({"x": xs[c.index]})["y"])
        np.testing.assert_array_equal(futures[c.index].result()["y"], c.outputs["y"])
    assert stream.submitted == stream.completed == 10 and stream.in_flight == 0


def test_stream_keeps_at_most_max_in_flight_requests_running():
    sess = Session(small_cnn(), NUMPY)
    gate = Gate(sess)
    x = batches(1)[0]
    stream = sess.stream(max_in_flight=2)
    stream.submit({"x": x}, 0)
    stream.submit({"x": x}, 1)
    assert gate.started.acquire(timeout=10) and gate.started.acquire(timeout=10)
    blocked = threading.Thread(target=stream.submit, args=({"x": x}, 2))
    blocked.start()
    time.sleep(0.2)
    assert blocked.is_alive() and stream.submitted == 2  # the third submit waits for a slot
    gate.release.set()
    blocked.join(10)
    done = stream.wait_all(timeout=30)
    stream.close()
    assert sorted(c.userdata for c in done) == [0, 1, 2]
    assert gate.peak == 2


def test_stream_reports_errors_to_the_callback_and_never_loses_them():
    sess = Session(pairs_model(), NUMPY)
    results: dict[int, Completion] = {}
    with sess.stream(max_in_flight=2, callback=lambda c: results.__setitem__(c.userdata, c)) as stream:
        for i, n in enumerate([4, 3, 6, 5]):
            stream.submit({"x": np.arange(n, dtype=np.float32)}, userdata=i)
        stream.wait_all(timeout=30)
    assert [results[i].ok for i in range(4)] == [True, False, True, False]
    assert all(isinstance(results[i].error, NnrtError) and results[i].outputs is None for i in (1, 3))
    np.testing.assert_array_equal(results[2].outputs["y"], np.arange(6, dtype=np.float32).reshape(2, 3))


def test_stream_without_callback_returns_completions_and_validates_feeds_on_submit():
    sess = Session(pairs_model(), NUMPY)
    with sess.stream(max_in_flight=2) as stream:
        with pytest.raises(InputError, match="expects dtype float32"):
            stream.submit({"x": np.zeros(2, np.int64)})
        for i in range(5):
            stream.submit({"x": np.full(4, i, np.float32)}, userdata=i)
        done = stream.wait_all(timeout=30)
        assert stream.wait_all(timeout=30) == []  # each completion is returned once
    assert sorted(c.userdata for c in done) == list(range(5))
    assert all(float(c.outputs["y"][0, 0]) == c.userdata for c in done)
    with pytest.raises(ExecutionError, match="closed"):
        stream.submit({"x": np.zeros(2, np.float32)})


def test_stream_callback_errors_are_raised_by_wait_all():
    sess = Session(pairs_model(), NUMPY)

    def callback(c: Completion) -> None:
        if c.userdata == 1:
            raise ValueError("callback broke")

    stream = sess.stream(max_in_flight=2, callback=callback)
    for i in range(3):
        stream.submit({"x": np.zeros(2, np.float32)}, userdata=i)
    with pytest.raises(ExecutionError, match="stream callback raised ValueError: callback broke"):
        stream.wait_all(timeout=30)
    assert stream.completed == 3
    stream.submit({"x": np.zeros(2, np.float32)}, userdata=9)  # still usable
    stream.close()


def test_stream_callback_may_submit_more_requests():
    sess = Session(pairs_model(), NUMPY)
    seen = []
    stream: Stream

    def callback(c: Completion) -> None:
        seen.append(c.userdata)
        if c.userdata < 5:
            stream.submit({"x": np.zeros(2, np.float32)}, userdata=c.userdata + 1)

    stream = sess.stream(max_in_flight=1, callback=callback)
    stream.submit({"x": np.zeros(2, np.float32)}, userdata=0)
    deadline = time.monotonic() + 30
    while len(seen) < 6 and time.monotonic() < deadline:
        stream.wait_all(timeout=30)
    stream.close()
    assert seen == [0, 1, 2, 3, 4, 5]


def test_stream_cancel_pending_reports_cancellations():
    sess = Session(small_cnn(), NUMPY)
    gate = Gate(sess)
    x = batches(1)[0]
    seen: list[Completion] = []
    stream = sess.stream(max_in_flight=1, callback=seen.append)
    first = stream.submit({"x": x}, userdata="running")
    assert gate.started.acquire(timeout=10)
    assert stream.cancel_pending() == 1
    gate.release.set()
    stream.wait_all(timeout=30)
    assert first.cancelled()
    (c,) = seen
    assert c.userdata == "running" and isinstance(c.error, CancelledError) and c.outputs is None
    later = stream.submit({"x": x}, userdata="after")
    np.testing.assert_array_equal(later.result(timeout=10)["y"], sess.run({"x": x})["y"])
    stream.close()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_stream_rejects_bad_max_in_flight(bad):
    sess = Session(pairs_model(), NUMPY)
    with pytest.raises(ConfigError, match="max_in_flight must be a positive integer"):
        sess.stream(max_in_flight=bad)
    with pytest.raises(ConfigError, match="callback must be callable"):
        sess.stream(callback="print")


@pytest.mark.parametrize("backend", ["numpy", "onnxruntime"])
def test_stream_on_a_light_model_matches_serial_runs(light_dir, backend):
    if backend == "onnxruntime":
        pytest.importorskip("onnxruntime")
    sess = Session(str(light_dir / "light_squeezenet.onnx"), ScheduleConfig(backends=[backend]))
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((1, 3, 224, 224)).astype(np.float32) for _ in range(6)]
    expected = [sess.run({"data_0": x}) for x in xs]
    results: dict[int, Completion] = {}
    with sess.stream(max_in_flight=3, callback=lambda c: results.__setitem__(c.userdata, c)) as stream:
        for i, x in enumerate(xs):
            stream.submit({"data_0": x}, userdata=i)
        stream.wait_all(timeout=120)
    for i, want in enumerate(expected):
        assert results[i].ok
        for name, y in want.items():
            np.testing.assert_array_equal(results[i].outputs[name], y)


# ------------------------------------------------------ stream concurrency
def _feed_tuner(tuner, seconds_per_completion, n, t0=0.0):
    """Drive ``tuner`` with completions spaced as the limit in force dictates."""
    t = t0
    for _ in range(n):
        t += seconds_per_completion[tuner.limit]
        tuner.completed(t, saturated=True)
    return t


from nnrt_core.runtime.streams import ConcurrencyTuner  # noqa: E402


def test_tuner_keeps_all_in_flight_when_parallel_is_faster():
    tuner = ConcurrencyTuner(3, window=4, cores=8, min_seconds=0.0)
    _feed_tuner(tuner, {3: 0.01, 1: 0.03}, 40)
    assert tuner.chosen == 3 and tuner.limit == 3
    assert tuner.rates[3] > tuner.rates[1]


def test_tuner_falls_back_to_one_at_a_time_when_that_is_faster():
    tuner = ConcurrencyTuner(2, window=4, cores=2, min_seconds=0.0)
    _feed_tuner(tuner, {2: 0.012, 1: 0.010}, 40)  # e.g. VGG-19: weights thrash the caches
    assert tuner.chosen == 1 and tuner.limit == 1


def test_tuner_prefers_parallel_within_the_margin_and_rechecks():
    tuner = ConcurrencyTuner(2, window=4, recheck=10, margin=0.05, min_seconds=0.0)
    _feed_tuner(tuner, {2: 0.0102, 1: 0.0100}, 20)  # 2 % slower: a tie
    assert tuner.chosen == 2
    t = _feed_tuner(tuner, {2: 0.02, 1: 0.01}, 40)  # the machine got busy: measured again
    assert tuner.chosen == 1
    assert t > 0


def test_tuner_ignores_idle_gaps():
    tuner = ConcurrencyTuner(2, window=3, min_seconds=0.0)
    t = 0.0
    for i in range(60):  # bursts of 5 saturated completions, then the stream runs dry for 5 s
        t += 0.01 if tuner.limit == 2 else 0.02
        tuner.completed(t, saturated=(i % 6 != 5))
        if i % 6 == 5:
            t += 5.0
    assert tuner.chosen == 2
    assert tuner.rates[2] == pytest.approx(100, rel=0.01) and tuner.rates[1] == pytest.approx(50, rel=0.01)


def test_stream_concurrency_one_never_overlaps_runs():
    sess = Session(small_cnn(), NUMPY)
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    active, peak = [0], [0]
    lock = threading.Lock()
    real_run = sess.run

    def run(feeds, output_names=None):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            time.sleep(0.005)
            return real_run(feeds, output_names)
        finally:
            with lock:
                active[0] -= 1

    sess.run = run
    with sess.stream(max_in_flight=3, concurrency=1) as stream:
        futs = [stream.submit({"x": x}) for _ in range(9)]
        stream.wait_all()
    assert peak[0] == 1 and stream.concurrency == 1
    assert all(f.result()["y"].shape == (2, 5) for f in futs)
    peak[0] = 0
    with sess.stream(max_in_flight=3, concurrency=3) as stream:
        for _ in range(9):
            stream.submit({"x": x})
        stream.wait_all()
    assert peak[0] > 1


def test_auto_stream_remembers_its_choice_on_the_session():
    sess = Session(small_cnn(), NUMPY)
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    real_run = sess.run
    sess.run = lambda feeds, names=None: (time.sleep(0.002), real_run(feeds, names))[1]  # the producer keeps up
    with sess.stream(max_in_flight=2) as stream:
        assert stream.tuner is not None
        stream.tuner.window = 2
        stream.tuner.min_seconds = 0.0
        for _ in range(40):
            stream.submit({"x": x})
        stream.wait_all()
    assert stream.tuner.chosen in (1, 2)
    assert sess.concurrency_choices == {2: stream.tuner.chosen}
    again = sess.stream(max_in_flight=2)
    assert again.concurrency == stream.tuner.chosen and again.tuner.chosen == stream.tuner.chosen
    again.close()


@pytest.mark.parametrize("bad", [0, 4, "fast", 1.0, True])
def test_stream_rejects_bad_concurrency(bad):
    sess = Session(small_cnn(), NUMPY)
    with pytest.raises(ConfigError, match="concurrency must be 'auto' or an integer from 1 to max_in_flight"):
        sess.stream(max_in_flight=3, concurrency=bad)


def test_tuner_tries_one_request_per_core_when_more_are_in_flight():
    tuner = ConcurrencyTuner(4, window=4, cores=2, min_seconds=0.0)
    assert tuner.levels == [4, 2, 1]
    _feed_tuner(tuner, {4: 0.012, 2: 0.010, 1: 0.018}, 60)  # 4 on 2 cores oversubscribes
    assert tuner.chosen == 2 and set(tuner.rates) == {4, 2, 1}
