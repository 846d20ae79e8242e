"""The NumPy backend's planned arenas (kernels write into planned buffers)."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from nnrt_core import ScheduleConfig, Session
from nnrt_numpy import arena as arena_module
from nnrt_numpy import program as program_mod

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
NUMPY = ScheduleConfig(backends=["numpy"])


def _program(sess):
    return sess.executor.steps[0].compiled.program


def _without_arena(monkeypatch):
    monkeypatch.setattr(program_mod.GraphProgram, "_plan_arena", lambda self: None)


def conv_model(output_is_view: bool = False):
    """c1 = Conv(x); r = Reshape(c1) (a view); c2 = Conv(x); y = Softmax(Reshape(r) + c2).

    c1's last direct reader is the Reshape, but its bytes are read through the
    view at the Add: a planner that ignored views would give c2 c1's bytes."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w2")
    flat = numpy_helper.from_array(np.array([1, -1], np.int64), "flat")
    back = numpy_helper.from_array(np.array([1, 8, 16, 16], np.int64), "back")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["c1", "flat"], ["r"], name="flatten"),
             helper.make_node("Conv", ["x", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["r", "back"], ["rb"], name="unflatten"),
             helper.make_node("Add", ["rb", "c2"], ["a"], name="add"),  # fused into conv2's chain
             helper.make_node("Softmax", ["a"], ["y"], name="softmax", axis=1)]  # (not last-axis: not fused)
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])]
    if output_is_view:
        outputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 2048]))
    g = helper.make_graph(nodes, "arena", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          outputs, [w1, w2, flat, back])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m


def x(seed: int = 1):
    return {"x": np.random.default_rng(seed).standard_normal((1, 3, 16, 16)).astype(np.float32)}


def test_buffers_read_through_views_live_until_the_view_is_read():
    m = conv_model()
    sess = Session(m, ScheduleConfig(backends=["numpy"], optimization_level="none"))
    arena = _program(sess).arena
    assert arena is not None and arena.describe()["arena_values"] == 2
    offsets = {s.step: s.offset for s in arena.slots}
    assert len(set(offsets.values())) == 2  # c1 is alive (through the view) while conv2 writes
    want = ReferenceEvaluator(m).run(None, x())[0]
    np.testing.assert_allclose(sess.run(x())["y"], want, rtol=1e-5, atol=1e-5)


def test_values_that_may_be_graph_outputs_stay_out_of_the_arena():
    m = conv_model(output_is_view=True)
    sess = Session(m, ScheduleConfig(backends=["numpy"], optimization_level="none"))
    arena = _program(sess).arena
    assert arena is not None and arena.describe()["arena_values"] == 1  # conv2 only; c1 escapes as the view r
    first = sess.run(x(1))
    kept = first["r"].copy()
    sess.run(x(2))  # reuses the arena
    np.testing.assert_array_equal(first["r"], kept)


def test_light_resnet50_arena_is_the_lower_bound_and_outputs_are_unchanged(monkeypatch):
    path = str(LIGHT / "light_resnet50.onnx")
    sess = Session(path, NUMPY)
    arena = _program(sess).arena
    info = arena.describe()
    assert info["arena_bytes"] <= 1.1 * info["arena_lower_bound_bytes"]
    assert info["arena_bytes"] < info["arena_naive_bytes"] / 4
    assert sess.stats()["host_arena_bytes"] == info["arena_bytes"]
    feeds = {sess.inputs[0].name: np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)}
    got = sess.run(feeds)
    _without_arena(monkeypatch)
    plain = Session(path, NUMPY)
    assert _program(plain).arena is None
    want = plain.run(feeds)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


def test_runs_reuse_one_arena_and_concurrent_runs_get_their_own():
    m = conv_model()
    sess = Session(m, ScheduleConfig(backends=["numpy"], optimization_level="none"))
    arena = _program(sess).arena
    want = sess.run(x(3))["y"]
    for _ in range(5):
        sess.run(x(3))
    assert arena.allocated == 1
    results, errors = [], []
    barrier = threading.Barrier(4)

    def work(seed):
        try:
            barrier.wait()
            for _ in range(20):
                results.append((seed, sess.run(x(seed))["y"]))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in (3, 4, 5, 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    expected = {s: sess.run(x(s))["y"] for s in (3, 4, 5, 6)}
    assert all(np.array_equal(y, expected[s]) for s, y in results)
    np.testing.assert_array_equal(expected[3], want)
    assert 1 <= arena.allocated <= 5


def test_warm_up_allocates_one_touched_arena_that_the_first_run_reuses():
    """``prefault`` touches the arena's pages once (one block, not every
    overlapping view; one byte a page, not a clearing of the whole block) and
    pools it: the first run takes that arena."""
    sess = Session(conv_model(), NUMPY)
    arena = _program(sess).arena
    assert arena is not None and arena.allocated == 1  # the build's warm-up made it
    assert not arena.prefault()  # only once
    views = arena.acquire()
    assert arena.allocated == 1
    roots = set()
    for v in views.values():
        while v.base is not None:
            v = v.base
        roots.add(id(v))
        assert v.nbytes == arena.size
    assert len(roots) == 1 and len(views) == len(arena.slots)
    root = next(iter(views.values()))
    while root.base is not None:
        root = root.base
    assert not root[::arena_module.PAGE_BYTES].any()  # the byte of each page it wrote
    arena.release(views)
