"""Deadlines inside long kernels and absurd pooling windows on the NPU
emulator (issue #35): every run with ``timeout=T`` returns within T + 100 ms
on every backend, and windows no chip runs are declined at compile."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import MemoryBudgetError, RunTimeoutError, UnsupportedNodeError
from nnrt_core.control import RunControl
from nnrt_npu_emu.ops.nn import MAX_POOL_TAPS


def _precision(backends) -> str:
    """The emulated NPU computes in fp16: asked for fp32 it declines its float nodes."""
    return "fp16" if "npu_emu" in backends else "fp32"

T_OUT = 0.3  #: the runs' timeout (s)
SLACK = 0.1  #: the target: back within T + 100 ms


def _model(nodes, xs, ys) -> bytes:
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, xs)], [h.make_tensor_value_info("y", T.FLOAT, ys)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 19)]).SerializeToString()


def _declared_mid(node, xs, declared) -> bytes:
    """``node`` writes ``t``, declared ``declared`` (a lie the frontend keeps on an intermediate
    value, where it corrects a graph output's: tests/test_declared_outputs.py), then ``y = Identity(t)``."""
    g = h.make_graph([node, h.make_node("Identity", ["t"], ["y"], name="id")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, xs)], [h.make_tensor_value_info("y", T.FLOAT, declared)],
                     value_info=[h.make_tensor_value_info("t", T.FLOAT, declared)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 19)]).SerializeToString()


def _pool_chain(m: int, n: int) -> tuple[bytes, list[int]]:
    """``m`` 5x5 average pools (same size) on ``[1, 16, n, n]``: each node short, the run long."""
    names = ["x"] + [f"t{i}" for i in range(m - 1)] + ["y"]
    nodes = [h.make_node("AveragePool", [names[i]], [names[i + 1]], kernel_shape=[5, 5], pads=[2, 2, 2, 2],
                         count_include_pad=1, name=f"p{i}") for i in range(m)]
    return _model(nodes, [1, 16, n, n], [1, 16, n, n]), [1, 16, n, n]


def _returns_by_the_deadline(sess: Session, shape: list[int], attempts: int = 2) -> float:
    """The least time over the deadline of ``attempts`` timed-out runs (each must time out)."""
    x = {"x": np.ones(shape, np.float32)}
    over = []
    for _ in range(attempts):
        t0 = time.perf_counter()
        with pytest.raises(RunTimeoutError):
            sess.run(x, timeout=T_OUT)
        over.append(time.perf_counter() - t0 - T_OUT)
    return min(over)


@pytest.mark.parametrize("backend, m, n", [("numpy", 400, 256), ("onnxruntime", 600, 384), ("npu_emu", 200, 256)])
def test_many_short_nodes_stop_within_t_plus_100_ms_on_every_backend(backend, m, n):
    model, shape = _pool_chain(m, n)
    sess = Session(model, ScheduleConfig(backends=[backend], backup=None, precision=_precision([backend])))
    assert _returns_by_the_deadline(sess, shape) < SLACK


@pytest.mark.parametrize("backend", ["numpy", "npu_emu"])
def test_one_long_pooling_window_stops_within_t_plus_100_ms(backend):
    """One AveragePool of 250 x 250 taps over [1, 4, 1000, 1000]: a single kernel (one NPU
    instruction) of seconds; its tap loops check the run's deadline."""
    k, n = 250, 1000
    model = _model([h.make_node("AveragePool", ["x"], ["y"], kernel_shape=[k, k], name="pool")],
                   [1, 4, n, n], [1, 4, n - k + 1, n - k + 1])
    sess = Session(model, ScheduleConfig(backends=[backend], backup=None, precision=_precision([backend])))
    assert _returns_by_the_deadline(sess, [1, 4, n, n]) < SLACK


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_absurd_pool_window_is_declined_by_the_emulator_and_refused(op):
    """The issue's case: kernel [7, 2**31-1] with ceil_mode on [1,1,2,2], the output declared [1,1,1,1]:
    the emulator looped over 2**31 taps past the deadline; now no backend takes it, fast."""
    model = _declared_mid(h.make_node(op, ["x"], ["t"], kernel_shape=[7, 2 ** 31 - 1], strides=[2, 2], ceil_mode=1,
                                      name="pool"), [1, 1, 2, 2], [1, 1, 1, 1])
    box: list[BaseException | None] = []

    def build_and_run() -> None:
        try:
            Session(model, ScheduleConfig(precision="fp16", backends=["npu_emu"], backup="numpy")).run(
                {"x": np.ones((1, 1, 2, 2), np.float32)}, timeout=2)
            box.append(None)
        except BaseException as e:  # handed to the test thread
            box.append(e)

    t = threading.Thread(target=build_and_run, daemon=True)
    t.start()
    t.join(10)
    assert box, "still running after 10 s"
    assert isinstance(box[0], UnsupportedNodeError), box[0]
    msg = str(box[0])
    assert f"npu_emu: kernel_shape [7, 2147483647] is a window of {7 * (2 ** 31 - 1)} taps, over the " \
           f"chip's {MAX_POOL_TAPS}" in msg
    assert "numpy" in msg and "kernel_shape[0] = 7" in msg  # the backup refuses it as well, naming the axis


@pytest.mark.parametrize("kwargs, shapes, reason", [
    ({"kernel_shape": [5, 5]}, ([1, 1, 4, 4], [1, 1, 1, 1]), r"kernel_shape\[0\] = 5 .* larger than spatial axis 0"),
    ({"kernel_shape": [2, 2]}, ([1, 1, 4, 4], [1, 1, 2, 2]), r"output shape \[1, 1, 2, 2\] does not match .*"
                                                              r"\[1, 1, 3, 3\]"),
])
def test_emulator_declines_windows_the_attributes_contradict(kwargs, shapes, reason):
    model = _declared_mid(h.make_node("MaxPool", ["x"], ["t"], name="pool", **kwargs), *shapes)
    with pytest.raises(UnsupportedNodeError, match=reason):
        Session(model, ScheduleConfig(precision="fp16", backends=["npu_emu"], backup=None))


def test_emulator_pool_with_ceil_mode_still_runs_and_matches_numpy():
    model = _model([h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1,
                                name="pool")], [1, 2, 6, 6], [1, 2, 3, 3])
    x = {"x": np.random.default_rng(0).standard_normal((1, 2, 6, 6)).astype(np.float32)}
    emu = Session(model, ScheduleConfig(precision="fp16", backends=["npu_emu"], backup=None))
    assert emu.placement == {"pool": "npu_emu"}
    ref = Session(model, ScheduleConfig(backends=["numpy"])).run(x)["y"]
    np.testing.assert_allclose(emu.run(x)["y"], ref, rtol=2e-3)  # the chip stores fp16


def test_emulator_host_copies_take_the_runs_memory_budget():
    """A padded average pool: the emulator's padded host copy is refused over the run's budget."""
    model = _model([h.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                count_include_pad=1, name="pool")], [1, 1, 64, 64], [1, 1, 64, 64])
    x = {"x": np.ones((1, 1, 64, 64), np.float32)}
    sess = Session(model, ScheduleConfig(precision="fp16", backends=["npu_emu"], backup=None))
    with pytest.raises(MemoryBudgetError, match=r"padded copy \[1, 1, 66, 66\] .* budget of 16384 bytes"):
        sess.run(x, control=RunControl(max_tensor_bytes=16384))  # the input is 16384 bytes, its padded copy more
    assert sess.run(x)["y"].shape == (1, 1, 64, 64)
