"""Run deadlines, real cancellation and the per-session memory budget
(``Session.run(timeout=...)``, ``RunFuture.cancel()``, ``RunControl``,
``ScheduleConfig.max_tensor_bytes``)."""
from __future__ import annotations

import threading
import time
from concurrent.futures import CancelledError
from typing import Any, Mapping

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from conftest import make_registry
from fakes import fake_plugin
from runaway_models import loop_model
from nnrt_core import Session, ScheduleConfig
from nnrt_core.backend import Backend, CompiledPartition, CompileOptions
from nnrt_core.errors import (ConfigError, MemoryBudgetError, OpError, RunCancelledError, RunStoppedError,
                              RunTimeoutError, UnsupportedNodeError)
from nnrt_core.ir import Graph, Node
from nnrt_core.control import RunControl


def _precision(backends) -> str:
    """The emulated NPU computes in fp16: asked for fp32 it declines its float nodes."""
    return "fp16" if "npu_emu" in backends else "fp32"

X1 = {"x": np.zeros(1, np.float32)}


def _model(nodes, inputs, outputs, inits=(), opset=17) -> bytes:
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)]).SerializeToString()


def _stops_fast(run, limit: float = 10.0) -> tuple[RunStoppedError, float]:
    """The RunStoppedError ``run()`` raises and the seconds it took; fails
    (instead of hanging) when the run does not stop within ``limit`` seconds."""
    box: list[BaseException | None] = []

    def target() -> None:
        try:
            run()
            box.append(None)
        except BaseException as e:  # handed to the test thread
            box.append(e)

    t0 = time.perf_counter()
    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(limit)
    seconds = time.perf_counter() - t0
    assert box, f"the run did not stop within {limit} s"
    assert isinstance(box[0], RunStoppedError), f"expected RunStoppedError, got {box[0]!r}"
    return box[0], seconds


# ------------------------------------------------------------------ deadlines
@pytest.mark.parametrize("backends", [["numpy"], ["onnxruntime"], ["npu_emu"]])
def test_loop_of_2_62_trips_stops_at_its_deadline_on_every_backend(backends):
    sess = Session(loop_model(), ScheduleConfig(backends=backends, backup="numpy", precision=_precision(backends)))
    err, seconds = _stops_fast(lambda: sess.run(X1, timeout=0.2))
    assert isinstance(err, RunTimeoutError) and isinstance(err, TimeoutError)
    assert seconds < 2.0
    assert "0.2 s timeout" in str(err)
    # it names where it stopped: the Loop (NumPy) or the ORT partition and its Loop node
    assert "'loop'" in str(err) or "Loop" in str(err), str(err)
    # the session is still usable and short runs are unaffected by a timeout
    small = Session(loop_model(3), ScheduleConfig(backends=backends, backup="numpy", precision=_precision(backends)))
    np.testing.assert_array_equal(small.run(X1, timeout=30)["y"], [3.0])


def test_timeout_and_control_are_validated():
    sess = Session(loop_model(3), ScheduleConfig(backends=["numpy"]))
    for bad in (-1, "1", True, float("nan")):
        with pytest.raises(ConfigError, match="timeout"):
            sess.run(X1, timeout=bad)
    with pytest.raises(ConfigError, match="not both"):
        sess.run(X1, timeout=1, control=RunControl(1))
    with pytest.raises(ConfigError, match="RunControl"):
        sess.run(X1, control=object())  # type: ignore[arg-type]
    for bad in (1, "yes", None):
        with pytest.raises(ConfigError, match="quiet"):
            RunControl(quiet=bad)  # type: ignore[arg-type]
    assert RunControl(quiet=True).quiet and not RunControl().quiet


def test_run_cancelled_from_another_thread_through_its_control():
    sess = Session(loop_model(), ScheduleConfig(backends=["numpy"]))
    control = RunControl()
    threading.Timer(0.1, control.cancel).start()
    err, seconds = _stops_fast(lambda: sess.run(X1, control=control))
    assert isinstance(err, RunCancelledError) and seconds < 2.0
    assert "cancelled" in str(err) and "'loop'" in str(err)
    assert not control.cancel()  # once only


def test_expired_control_stops_before_the_first_partition():
    sess = Session(loop_model(3), ScheduleConfig(backends=["numpy"]))
    err, _ = _stops_fast(lambda: sess.run(X1, timeout=0))
    assert isinstance(err, RunTimeoutError)


# --------------------------------------------------------------- run_async
@pytest.mark.parametrize("backend", ["numpy", "onnxruntime"])
def test_cancel_really_stops_the_run_and_frees_its_worker(backend):
    sess = Session(loop_model(), ScheduleConfig(backends=[backend], precision=_precision([backend])))
    workers = sess.run_pool().workers
    for _ in range(3 * workers):  # more cancels than workers: each must come back
        fut = sess.run_async(X1)
        deadline = time.monotonic() + 10
        while not fut.running() and time.monotonic() < deadline:
            time.sleep(0.002)
        assert fut.cancel()
        with pytest.raises(CancelledError):
            fut.result(timeout=0)
        assert fut.control is not None and fut.control.cancelled
    # the pool is not exhausted: a short run gets a worker at once
    small = {"x": np.ones(1, np.float32)}
    sess_small = Session(loop_model(2), ScheduleConfig(backends=[backend], precision=_precision([backend])))
    assert sess_small.run_async(small).result(timeout=10)["y"][0] == 3.0
    # every worker of the cancelled runs' pool is free: new runs start (and time out) at once;
    # a stuck worker would leave its future pending (concurrent.futures' TimeoutError below)
    t0 = time.perf_counter()
    futs = [sess.run_async(X1, timeout=0.05) for _ in range(workers)]
    for f in futs:
        assert isinstance(f.exception(timeout=10), RunTimeoutError)
    assert time.perf_counter() - t0 < 5.0


def test_run_async_timeout_counts_from_submission_and_reaches_the_future():
    sess = Session(loop_model(), ScheduleConfig(backends=["numpy"]))
    fut = sess.run_async(X1, timeout=0.1)
    assert isinstance(fut.exception(timeout=10), RunTimeoutError)


def test_stream_cancel_pending_stops_running_requests():
    sess = Session(loop_model(), ScheduleConfig(backends=["numpy"]))
    with sess.stream(max_in_flight=2, concurrency=2) as stream:
        futs = [stream.submit(X1) for _ in range(2)]
        time.sleep(0.1)
        assert stream.cancel_pending() == 2
        done = stream.wait_all(timeout=10)
    assert all(isinstance(c.error, CancelledError) for c in done) and all(f.cancelled() for f in futs)


# ------------------------------------------------------ third-party backends
class _LegacyPartition(CompiledPartition):
    """A partition written before RunControl: it overrides ``run(inputs)``."""

    def run(self, inputs: Mapping[str, Any]) -> dict[str, Any]:  # type: ignore[override]
        time.sleep(0.15)  # slow, and nothing can stop it
        return {self.output_names[0]: np.maximum(inputs[self.input_names[0]], 0)}

    def _run(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        return self.run(inputs)


class LegacyBackend(Backend):
    name = "legacy"

    def _supports(self, node: Node, options: CompileOptions) -> str | None:
        return None if node.op_type == "Relu" else "Relu only"

    def _compile(self, graph: Graph, options: CompileOptions) -> CompiledPartition:
        return _LegacyPartition(self, graph)


def _relu_then_neg() -> bytes:
    return _model([h.make_node("Relu", ["x"], ["r"], name="relu"), h.make_node("Neg", ["r"], ["y"], name="neg")],
                  [h.make_tensor_value_info("x", T.FLOAT, [2])], [h.make_tensor_value_info("y", T.FLOAT, [2])])


def test_backend_without_control_support_still_runs_and_the_executor_checks_between_partitions():
    reg = make_registry(fake_plugin(LegacyBackend))
    sess = Session(_relu_then_neg(), ScheduleConfig(backends=["legacy"], backup="numpy"), registry=reg)
    assert sess.placement == {"relu": "legacy", "neg": "numpy"}
    x = {"x": np.array([-1.0, 2.0], np.float32)}
    np.testing.assert_array_equal(sess.run(x, timeout=30)["y"], [0.0, -2.0])
    np.testing.assert_array_equal(sess.run_async(x, timeout=30).result(timeout=10)["y"], [0.0, -2.0])
    err, _ = _stops_fast(lambda: sess.run(x, timeout=0.05))
    assert isinstance(err, RunTimeoutError) and "before it started" in str(err) and "numpy" in str(err)
    # the inherited run_async hands the control on only to a run that takes it
    legacy = sess.compiled_model.compiled[0]
    assert isinstance(legacy, _LegacyPartition)
    out = legacy.run_async({"x": x["x"]}, control=RunControl(timeout=30)).result(timeout=10)
    np.testing.assert_array_equal(next(iter(out.values())), [0.0, 2.0])


# ------------------------------------------------------------ absurd pools
@pytest.mark.parametrize("static", [True, False])
def test_average_pool_with_an_absurd_kernel_is_refused_fast(static):
    dims = [1, 1, 4, 4] if static else [1, 1, "H", "W"]
    model = _model([h.make_node("AveragePool", ["x"], ["y"], kernel_shape=[10 ** 6, 2 ** 31 - 1], name="pool")],
                   [h.make_tensor_value_info("x", T.FLOAT, dims)],
                   [h.make_tensor_value_info("y", T.FLOAT, [None] * 4)])
    t0 = time.perf_counter()
    with pytest.raises((OpError, UnsupportedNodeError), match="kernel_shape\\[0\\] = 1000000.*larger than"):
        Session(model, ScheduleConfig(backends=["numpy"])).run({"x": np.zeros((1, 1, 4, 4), np.float32)})
    assert time.perf_counter() - t0 < 5.0


@pytest.mark.parametrize("backend", ["numpy", "npu_emu"])
@pytest.mark.parametrize("length, pads, fits", [(3, [0, 0], False), (3, [1, 0], False), (3, [1, 1], True)])
def test_conv_window_larger_than_the_padded_input_names_the_axis(backend, length, pads, fits):
    """A free-length input shorter than the kernel (silero_vad's STFT Conv on a short chunk) is our
    OpError naming the kernel and the padded axis, not numpy's reshape error; a window that fits runs."""
    w = np.ones((3, 2, 5), np.float32)
    model = _model([h.make_node("Conv", ["x", "w"], ["y"], pads=pads, name="conv")],
                   [h.make_tensor_value_info("x", T.FLOAT, [1, 2, "L"])],
                   [h.make_tensor_value_info("y", T.FLOAT, [1, 3, "M"])], [numpy_helper.from_array(w, "w")])
    sess = Session(model, ScheduleConfig(backends=[backend], precision=_precision([backend])))
    x = np.ones((1, 2, length), np.float32)
    if fits:
        np.testing.assert_allclose(sess.run({"x": x})["y"], np.full((1, 3, 1), 6.0, np.float32))
        return
    with pytest.raises(OpError, match=r"node 'conv'.*kernel_shape\[0\] = 5 .*larger than spatial axis 0 "
                                      rf"of the input padded \({length} \+ pads {pads[0]}, {pads[1]}"):
        sess.run({"x": x})


def test_pool_window_that_fits_the_padded_input_still_runs():
    model = _model([h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="pool")],
                   [h.make_tensor_value_info("x", T.FLOAT, [1, 1, 1, 1])],
                   [h.make_tensor_value_info("y", T.FLOAT, [1, 1, 1, 1])])
    y = Session(model, ScheduleConfig(backends=["numpy"])).run({"x": np.full((1, 1, 1, 1), 5, np.float32)})["y"]
    assert y.reshape(-1).tolist() == [5.0]


# ---------------------------------------------------------- memory budget
BIG = 2 ** 40


def _huge_cases() -> dict[str, tuple[bytes, dict[str, np.ndarray]]]:
    """One model per op whose output (from run-time inputs) would be 2**40 elements or more."""
    f = lambda name, dims: h.make_tensor_value_info(name, T.FLOAT, dims)  # noqa: E731
    i = lambda name, dims: h.make_tensor_value_info(name, T.INT64, dims)  # noqa: E731
    x4 = np.ones((1, 1, 2, 2), np.float32)
    return {
        "ConstantOfShape": (_model([h.make_node("ConstantOfShape", ["s"], ["y"], name="n")], [i("s", [2])],
                                   [f("y", [None, None])]), {"s": np.array([2 ** 20, 2 ** 20], np.int64)}),
        "Expand": (_model([h.make_node("Expand", ["x", "s"], ["y"], name="n")], [f("x", [1]), i("s", [2])],
                          [f("y", [None, None])]),
                   {"x": np.ones(1, np.float32), "s": np.array([2 ** 20, 2 ** 20], np.int64)}),
        "Tile": (_model([h.make_node("Tile", ["x", "r"], ["y"], name="n")], [f("x", [1, 1]), i("r", [2])],
                        [f("y", [None, None])]),
                 {"x": np.ones((1, 1), np.float32), "r": np.array([2 ** 20, 2 ** 20], np.int64)}),
        "Pad": (_model([h.make_node("Pad", ["x", "p"], ["y"], name="n")], [f("x", [1, 1]), i("p", [4])],
                       [f("y", [None, None])]),
                {"x": np.ones((1, 1), np.float32), "p": np.array([2 ** 20, 2 ** 20, 0, 2 ** 20], np.int64)}),
        "Range": (_model([h.make_node("Range", ["a", "b", "d"], ["y"], name="n")],
                         [i("a", []), i("b", []), i("d", [])], [i("y", [None])]),
                  {"a": np.array(0, np.int64), "b": np.array(BIG, np.int64), "d": np.array(1, np.int64)}),
        "Resize": (_model([h.make_node("Resize", ["x", "", "sc"], ["y"], name="n")],
                          [f("x", [1, 1, 2, 2]), f("sc", [4])], [f("y", [None] * 4)]),
                   {"x": x4, "sc": np.array([1, 1, 2 ** 19, 2 ** 19], np.float32)}),
        "CenterCropPad": (_model([h.make_node("CenterCropPad", ["x", "s"], ["y"], name="n")],
                                 [f("x", [1, 1]), i("s", [2])], [f("y", [None, None])], opset=18),
                          {"x": np.ones((1, 1), np.float32), "s": np.array([2 ** 20, 2 ** 20], np.int64)}),
        "Add": (_model([h.make_node("Add", ["a", "b"], ["y"], name="n")], [f("a", [None, 1]), f("b", [1, None])],
                       [f("y", [None, None])]),
                {"a": np.ones((2 ** 20, 1), np.float32), "b": np.ones((1, 2 ** 20), np.float32)}),
        "MatMul": (_model([h.make_node("MatMul", ["a", "b"], ["y"], name="n")], [f("a", [None, 1]), f("b", [1, None])],
                          [f("y", [None, None])]),
                   {"a": np.ones((2 ** 20, 1), np.float32), "b": np.ones((1, 2 ** 20), np.float32)}),
        "HannWindow": (_model([h.make_node("HannWindow", ["s"], ["y"], name="n")], [i("s", [])],
                              [f("y", [None])]), {"s": np.array(BIG, np.int64)}),
    }


@pytest.mark.parametrize("op", sorted(_huge_cases()))
def test_huge_computed_tensors_are_refused_before_allocation(op):
    model, feeds = _huge_cases()[op]
    sess = Session(model, ScheduleConfig(backends=["numpy"]))
    t0 = time.perf_counter()
    with pytest.raises(MemoryBudgetError) as info:
        sess.run(feeds)
    assert time.perf_counter() - t0 < 2.0
    msg = str(info.value)
    assert f"node 'n' ({op})" in msg and "memory budget of 8589934592 bytes" in msg and "shape [" in msg


def test_memory_budget_is_configurable():
    model = _model([h.make_node("ConstantOfShape", ["s"], ["y"], name="fill")],
                   [h.make_tensor_value_info("s", T.INT64, [1])], [h.make_tensor_value_info("y", T.FLOAT, [None])])
    feeds = {"s": np.array([1000], np.int64)}  # 4000 bytes
    assert Session(model, ScheduleConfig(backends=["numpy"])).run(feeds)["y"].shape == (1000,)
    small = Session(model, ScheduleConfig(backends=["numpy"], max_tensor_bytes=1024))
    with pytest.raises(MemoryBudgetError, match=r"node 'fill' \(ConstantOfShape\): output of shape \[1000\] "
                                                r"\(float32\) needs 4000 bytes, over the memory budget of 1024"):
        small.run(feeds)
    assert small.run({"s": np.array([256], np.int64)})["y"].shape == (256,)  # 1024 bytes: allowed
    # a run's own control may carry another budget
    with pytest.raises(MemoryBudgetError, match="budget of 100 bytes"):
        small.run({"s": np.array([256], np.int64)}, control=RunControl(max_tensor_bytes=100))
    with pytest.raises(ConfigError, match="max_tensor_bytes"):
        ScheduleConfig(max_tensor_bytes=0)


def test_static_sizes_over_the_budget_are_refused_at_build():
    model = _model([h.make_node("Expand", ["x", "s"], ["y"], name="grow")],
                   [h.make_tensor_value_info("x", T.FLOAT, [1])], [h.make_tensor_value_info("y", T.FLOAT, [64, 64])],
                   [h.make_tensor("s", T.INT64, [2], [64, 64])])
    with pytest.raises(MemoryBudgetError, match=r"node 'grow' \(Expand\).*\[64, 64\].*budget of 4096 bytes"):
        Session(model, ScheduleConfig(backends=["numpy"], max_tensor_bytes=4096))
    assert Session(model, ScheduleConfig(backends=["numpy"], max_tensor_bytes=16384)).run(
        {"x": np.ones(1, np.float32)})["y"].shape == (64, 64)


# ------------------------------------------------------------ NPU emulator
class _StopAfter(RunControl):
    """A control that reports "stopped" from its ``n``-th check on (a cancel at a known point)."""

    __slots__ = ("left",)

    def __init__(self, n: int) -> None:
        super().__init__()
        self.left = n

    def stopped(self) -> bool:
        self.left -= 1
        if self.left < 0 and not self.cancelled:
            self.cancel()
        return super().stopped()


def _relu_chain(n: int) -> bytes:
    nodes = [h.make_node("Relu", [f"v{k}"], [f"v{k + 1}"], name=f"relu{k}") for k in range(n)]
    return _model(nodes, [h.make_tensor_value_info("v0", T.FLOAT, [1, 8])],
                  [h.make_tensor_value_info(f"v{n}", T.FLOAT, [1, 8])])


def test_npu_queue_drops_stopped_jobs_and_the_program_stops_between_instructions():
    sess = Session(_relu_chain(6), ScheduleConfig(precision="fp16", backends=["npu_emu"], backup=None))
    assert set(sess.placement.values()) == {"npu_emu"}
    part = sess.compiled_model.compiled[0]
    x = {part.input_names[0]: np.ones((1, 8), np.float32)}
    with pytest.raises(RunTimeoutError, match="command queue .* never started"):
        part.run_async(x, RunControl(timeout=0)).result(timeout=10)  # queued: dropped before it starts
    with pytest.raises(RunTimeoutError, match=r"instruction 0 \(.*\) of node .* on the NPU"):
        part.run(x, RunControl(timeout=0))  # idle queue: runs inline, stops before its first instruction
    # one check in the queue, then one per host step: the input cast and the first Relu are one step
    # (the Relu is applied in the cast's fp16 store, see nnrt_npu_emu.hostfuse), so the fourth check is
    # made before instruction 4
    assert part.bound.fused == 1
    with pytest.raises(RunCancelledError, match=r"instruction 4 \(.*\) of node .* on the NPU"):
        part.run_async(x, _StopAfter(4)).result(timeout=10)
    np.testing.assert_array_equal(sess.run({"v0": np.ones((1, 8), np.float32)}, timeout=30)["v6"],
                                  np.ones((1, 8), np.float32))


def test_finished_runs_do_not_pile_up_in_the_deadline_watchdog():
    from nnrt_core.control import watched_deadlines

    fired = []
    for _ in range(2000):
        c = RunControl(timeout=1e6)
        remove = c.on_stop(lambda: fired.append(1))
        remove()  # the guarded work finished
    assert watched_deadlines() <= 600 and not fired
    late = RunControl(timeout=0.05)
    late.on_stop(lambda: fired.append(2))
    deadline = time.monotonic() + 5
    while not fired and time.monotonic() < deadline:
        time.sleep(0.005)
    assert fired == [2]  # the watchdog fires an expired control's callbacks


def test_mixed_device_and_host_partitions_stop_at_the_deadline():
    """npu_emu Relus then a NumPy Loop: the overlapped executor path."""
    relu = [h.make_node("Relu", ["x"], ["r"], name="relu"), h.make_node("Relu", ["r"], ["r2"], name="relu2")]
    body = h.make_graph(
        [h.make_node("Identity", ["c_in"], ["c_out"]), h.make_node("Add", ["x_in", "x_in"], ["x_out"])], "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, []),
         h.make_tensor_value_info("x_in", T.FLOAT, [1, 8])],
        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("x_out", T.FLOAT, [1, 8])])
    loop = h.make_node("Loop", ["M", "cond", "r2"], ["y"], body=body, name="loop")
    model = _model(relu + [loop], [h.make_tensor_value_info("x", T.FLOAT, [1, 8])],
                   [h.make_tensor_value_info("y", T.FLOAT, [1, 8])],
                   [h.make_tensor("M", T.INT64, [], [2 ** 62]), h.make_tensor("cond", T.BOOL, [], [True])])
    sess = Session(model, ScheduleConfig(precision="fp16", backends=["npu_emu"], backup="numpy"))
    assert sess.placement["relu"] == "npu_emu" and sess.placement["loop"] == "numpy"
    assert sess.executor.overlap
    err, seconds = _stops_fast(lambda: sess.run({"x": np.ones((1, 8), np.float32)}, timeout=0.2))
    assert isinstance(err, RunTimeoutError) and "'loop'" in str(err) and seconds < 2.0


def test_accepts_control_is_remembered_per_function_and_still_right():
    """``accepts_control`` caches its answer per function (not per bound method or
    instance): each function keeps its own answer, callable objects are asked each time."""
    from nnrt_core import control as ctl

    class Old:
        def run(self, inputs):
            return inputs

    class New:
        def run(self, inputs, control=None):
            return inputs

    class Kw:
        def run(self, inputs, **kwargs):
            return inputs

    class CallableObj:
        def __call__(self, inputs, control=None):
            return inputs

    for _ in range(2):  # the second round answers from the cache
        assert not ctl.accepts_control(Old().run)
        assert ctl.accepts_control(New().run)
        assert ctl.accepts_control(Kw().run)
        assert ctl.accepts_control(CallableObj())
    assert Old.run in ctl._ACCEPTS and New.run in ctl._ACCEPTS
    assert ctl._ACCEPTS[Old.run] is False and ctl._ACCEPTS[New.run] is True
    assert not ctl.accepts_control(len)  # a builtin without a signature: no control
