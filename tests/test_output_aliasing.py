"""A session's outputs never share memory with the caller's feeds, on every
installed backend: a view the backend returns (Identity, Reshape, Squeeze,
Flatten of an input) is copied before it reaches the caller."""
from __future__ import annotations

import numpy as np
import pytest

from nnrt_core import GraphBuilder, ScheduleConfig, Session
from nnrt_core.registry import default_registry
from nnrt_core.runtime.executor import unaliased

BACKENDS = sorted(r.name for r in default_registry().available_backends())


def _views_model():
    b = GraphBuilder("views")
    x = b.input("x", "float32", [2, 1, 3])
    b.output(b.identity(x), "same")
    b.output(b.reshape(x, [6]), "flat")
    b.output(b.squeeze(x, [1]), "squeezed")
    b.output(b.relu(x), "computed")
    return b.build()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("path", ["run", "run_async"])
def test_outputs_do_not_alias_feeds(backend, path):
    sess = Session(_views_model(), ScheduleConfig(backends=[backend]))
    x = np.arange(6, dtype=np.float32).reshape(2, 1, 3)
    out = sess.run({"x": x}) if path == "run" else sess.run_async({"x": x}).result(timeout=60)
    for name, y in out.items():
        assert not np.shares_memory(y, x), f"{backend}: output {name!r} shares memory with the feed"
    x[...] = -1  # the caller reuses its buffer: outputs keep the values of the run
    np.testing.assert_array_equal(out["flat"], np.arange(6, dtype=np.float32))
    out["same"][...] = 7  # writing an output leaves the caller's input alone
    assert (x == -1).all()


def test_unaliased_copies_only_what_shares_memory():
    feed = np.zeros((4, 4), np.float32)
    fresh = np.ones(3, np.float32)
    view, same = feed[1:3], feed
    kept_view = np.ones((4, 4))[::2]  # a view of something else
    res = unaliased([fresh, view, same, kept_view], {"x": feed})
    assert res[0] is fresh and res[3] is kept_view
    assert res[1] is not view and not np.shares_memory(res[1], feed)
    assert res[2] is not same and not np.shares_memory(res[2], feed)
    np.testing.assert_array_equal(res[1], view)


@pytest.mark.parametrize("backend", BACKENDS)
def test_graph_input_passed_through_is_copied(backend):
    import onnx
    from onnx import TensorProto, helper

    vi = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "passthrough",
                          [vi("x", TensorProto.FLOAT, [2, 3])],
                          [vi("x", TensorProto.FLOAT, [2, 3]), vi("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    sess = Session(model.SerializeToString(), ScheduleConfig(backends=[backend]))
    x = np.ones((2, 3), np.float32)
    out = sess.run({"x": x})
    assert out["x"] is not x and not np.shares_memory(out["x"], x)


def test_fresh_outputs_trait_skips_the_check():
    from nnrt_core.runtime.executor import Executor

    class Step:  # what Executor reads of an ExecutionStep
        def __init__(self, fresh):
            self.backend = type("B", (), {"fresh_outputs": fresh, "host_memory": True})()
            self.inputs, self.outputs, self.release, self.types = ["x"], ["y"], [], {}
            self.compiled = type("C", (), {"run": None, "run_async": None, "name": "p"})()

        def output_check(self):
            return lambda outs: outs

    assert Executor([Step(False)], ["y"], {}, ["x"])._aliasable == (0,)
    assert Executor([Step(True)], ["y"], {}, ["x"])._aliasable == ()
    assert Executor([Step(True)], ["y", "x"], {}, ["x"])._aliasable == (1,)  # a graph input passed through
