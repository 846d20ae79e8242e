"""The per-call run path (docs/runtime.md, "The run path"): checks decided at
build (``nnrt_core.runtime.dims``), and what the lean single-partition and
host-only paths keep: our errors for bad feeds and faulty outputs, outputs
safe from the next run and from the caller's buffers, deadlines and cancel."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_models import make_model, vi
from nnrt_core import ScheduleConfig, Session
from nnrt_core.control import RunControl
from nnrt_core.errors import ExecutionError, InputError, RunCancelledError, RunTimeoutError
from nnrt_core.ir import TensorType
from nnrt_core.ir.dtypes import DataType
from nnrt_core.runtime.dims import passes, shape_test
from nnrt_core.runtime.output_check import OutputCheck

ENGINES = ["numpy", "onnxruntime", "openvino"]


def _stateful_model():
    """Like silero-vad's streaming model: a free-shaped signal, a recurrent
    state with fixed outer dims and a free middle one, an int64 scalar rate;
    the state comes back as ``state_out`` (an Identity: a view of the feed on
    a backend that returns views)."""
    rate = numpy_helper.from_array(np.array(16000, np.int64), "rate")
    return make_model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu"),
         helper.make_node("Identity", ["state"], ["state_out"], name="keep"),
         helper.make_node("Equal", ["sr", "rate"], ["is_16k"], name="eq")],
        [vi("x", shape=(None, None)), vi("state", shape=(2, None, 128)), vi("sr", TensorProto.INT64, ())],
        [vi("y", shape=(None, None)), vi("state_out", shape=(2, None, 128)), vi("is_16k", TensorProto.BOOL, ())],
        inits=[rate])


def _feeds(batch: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((batch, 576)).astype(np.float32),
            "state": rng.standard_normal((2, batch, 128)).astype(np.float32),
            "sr": np.array(16000, np.int64)}


def _session(engine: str) -> Session:
    if engine != "numpy":
        pytest.importorskip(engine)
        pytest.importorskip(f"nnrt_{engine}")
    sess = Session(_stateful_model(), ScheduleConfig(backends=[engine], backup=None))
    assert [p.backend for p in sess.partitions] == [engine]
    return sess


# ------------------------------------------------------------ dims decided at build
@pytest.mark.parametrize("declared, shape, ok", [
    ((2, None, 128), (2, 7, 128), True), ((2, None, 128), (3, 7, 128), False), ((2, None, 128), (2, 7, 127), False),
    ((2, None, 128), (2, 128), False), ((None, 3), (5, 3), True), ((None, 3), (5, 4), False),  # one fixed dim
    ((None, None), (1, 576), True), ((None, None), (576,), False), ((), (), True), ((), (1,), False),
    ((1, 64), (1, 64), True), ((1, 64), (64, 1), False), (None, (1, 2, 3), True), (("N", 3), (9, 3), True),
])
def test_shape_test_decides_what_a_declared_shape_accepts(declared, shape, ok):
    assert passes(shape_test(declared), shape) is ok


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name, bad, says", [
    ("state", np.zeros((3, 1, 128), np.float32), "dimension 0 to be 2"),
    ("state", np.zeros((2, 1, 127), np.float32), "dimension 2 to be 128"),
    ("state", np.zeros((2, 128), np.float32), "rank 3"),
    ("x", np.zeros(576, np.float32), "rank 2"),
    ("sr", np.array([16000], np.int64), "rank 0"),
    ("sr", np.array(16000, np.int32), "dtype int64"),
    ("x", np.zeros((1, 576), np.float64), "dtype float32"),
])
def test_bad_feeds_get_our_error_on_every_single_partition_path(engine, name, bad, says):
    sess = _session(engine)
    ok = _feeds()
    assert sess.validate_feeds(ok) is ok  # the fast check accepts good feeds as they are
    with pytest.raises(InputError, match=f"input '{name}' expects .*{says}"):
        sess.run({**ok, name: bad})


@pytest.mark.parametrize("engine", ENGINES)
def test_missing_and_unknown_feeds_are_named(engine):
    sess = _session(engine)
    feeds = _feeds()
    with pytest.raises(InputError, match=r"missing input\(s\) \['sr'\]"):
        sess.run({k: v for k, v in feeds.items() if k != "sr"})
    with pytest.raises(InputError, match=r"unknown input\(s\) \['srr'\]"):
        sess.run({**{k: v for k, v in feeds.items() if k != "sr"}, "srr": feeds["sr"]})


def _check(declared):
    t = TensorType(DataType.FLOAT, declared)
    return OutputCheck("fake", "p0", ["y"], {"y": t})


@pytest.mark.parametrize("declared, shape, ok", [
    ((2, None, 128), (2, 5, 128), True), ((2, None, 128), (2, 5, 64), False), ((2, None, 128), (2, 5), False),
    ((None, 1), (4, 1), True), ((None, 1), (4, 2), False), ((1, 64), (1, 64), True), ((1, 64), (1, 63), False),
])
def test_output_check_tests_fixed_dims_of_partly_free_outputs(declared, shape, ok):
    check = _check(declared)
    outs = {"y": np.zeros(shape, np.float32)}
    if ok:
        assert check(outs) is outs
    else:
        with pytest.raises(ExecutionError, match=r"backend 'fake' partition 'p0' returned shape .* for output 'y'"):
            check(outs)
    with pytest.raises(ExecutionError, match="returned dtype float64"):
        check({"y": np.zeros(shape, np.float64)})


# ------------------------------------------------------------ output safety
@pytest.mark.parametrize("engine", ENGINES)
def test_outputs_are_safe_from_the_next_run_and_from_the_feeds(engine):
    sess = _session(engine)
    feeds = _feeds()
    first = sess.run(feeds)
    kept = {k: v.copy() for k, v in first.items()}
    np.testing.assert_array_equal(first["state_out"], feeds["state"])
    assert not np.shares_memory(first["state_out"], feeds["state"])  # the state handed back is not the feed
    feeds["state"][...] = 7.0  # the caller reuses its buffers (as a streaming VAD does)
    feeds["x"][...] = -1.0
    second = sess.run(feeds)
    for name, want in kept.items():
        np.testing.assert_array_equal(first[name], want)  # the next run did not overwrite the first's outputs
    np.testing.assert_array_equal(second["state_out"], feeds["state"])
    assert not second["y"].any() and bool(second["is_16k"])


@pytest.mark.parametrize("engine", ENGINES)
def test_non_contiguous_and_read_only_feeds_give_the_same_outputs(engine):
    sess = _session(engine)
    feeds = _feeds(2)
    want = sess.run(feeds)
    wide = np.zeros((2, 2 * 576), np.float32)
    wide[:, ::2] = feeds["x"]
    frozen = feeds["state"].copy()
    frozen.flags.writeable = False
    got = sess.run({**feeds, "x": wide[:, ::2], "state": frozen})
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


# ------------------------------------------------------------ deadlines and cancel
@pytest.mark.parametrize("engine", ENGINES)
def test_deadline_and_cancel_still_stop_a_single_partition_run(engine):
    sess = _session(engine)
    feeds = _feeds()
    np.testing.assert_array_equal(sess.run(feeds, timeout=30)["y"], np.maximum(feeds["x"], 0))
    with pytest.raises(RunTimeoutError):
        sess.run(feeds, timeout=0)
    control = RunControl()
    control.cancel()
    with pytest.raises(RunCancelledError):
        sess.run(feeds, control=control)


# ------------------------------------------------------------ host-only multi-partition plans
def _chain():
    """x -> Relu -> Neg -> Relu -> Neg = y, with a constant graph output and the input passed through."""
    k = numpy_helper.from_array(np.arange(4, dtype=np.float32), "k")
    return make_model(
        [helper.make_node("Relu", ["x"], ["a"], name="n0"), helper.make_node("Neg", ["a"], ["b"], name="n1"),
         helper.make_node("Relu", ["b"], ["c"], name="n2"), helper.make_node("Neg", ["c"], ["y"], name="n3")],
        [vi("x", shape=(1, 64))], [vi("y", shape=(1, 64)), vi("k", shape=(4,)), vi("x", shape=(1, 64))], inits=[k])


def test_host_only_multi_partition_plan_keeps_its_behaviour():
    pytest.importorskip("onnxruntime")
    cfg = ScheduleConfig(backends=["onnxruntime", "numpy"], optimization_level="none", pins={"n1": "numpy"})
    sess = Session(_chain(), cfg)
    assert [p.backend for p in sess.partitions] == ["onnxruntime", "numpy", "onnxruntime"]
    x = np.random.default_rng(1).standard_normal((1, 64)).astype(np.float32)
    out = sess.run({"x": x})
    assert list(out) == ["y", "k", "x"]
    np.testing.assert_array_equal(out["y"], -np.maximum(-np.maximum(x, 0), 0))
    np.testing.assert_array_equal(out["k"], np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(out["x"], x)
    assert not np.shares_memory(out["x"], x)  # a graph input passed through is copied, not handed back
    assert sess.stats()["host_device_copies"] == 0
    with pytest.raises(InputError, match="dimension 1 to be 64"):
        sess.run({"x": np.zeros((1, 63), np.float32)})
    control = RunControl()
    control.cancel()
    with pytest.raises(RunCancelledError, match="before it started"):
        sess.run({"x": x}, control=control)



def test_declared_shape_watch_reports_a_contradiction_once_and_passes_agreeing_runs():
    from nnrt_core.runtime.output_check import DeclaredShapeWatch

    seen: list[tuple[str, str]] = []
    declared = {"state_out": TensorType(DataType.FLOAT, (2, None, 128)), "y": TensorType(DataType.FLOAT, (1, 1))}
    watch = DeclaredShapeWatch("p0", declared, lambda name, msg: seen.append((name, msg)))
    agree = {"state_out": np.zeros((2, 5, 128), np.float32), "y": np.zeros((1, 1), np.float32)}
    for _ in range(3):
        assert watch(agree) is agree
    assert seen == []
    bad = {"state_out": np.zeros((3, 5, 128), np.float32), "y": np.zeros((1, 2), np.float32)}
    assert watch(bad) is bad and watch(bad) is bad  # returned as computed
    assert [name for name, _ in seen] == ["state_out", "y"]  # once per output
    assert "returned shape [3, 5, 128]" in seen[0][1] and "returned shape [1, 2]" in seen[1][1]
