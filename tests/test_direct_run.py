"""The direct run path (``CompiledPartition.direct_run``, ``Executor.direct``):
a plan that is one host partition with nothing to convert is called per plain
``Session.run`` through one closure made at build, with the same feed errors,
output checks, wrap points and output safety as the general path."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pytest
from onnx import TensorProto, helper

from conftest import make_registry
from fakes import _FakePartition, fake_plugin, make_fake_backend
from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import ExecutionError, InputError
from nnrt_core.runtime.thread_budget import CORES, use_thread_budget


def two_outputs_model(dims=(2, 3)) -> Any:
    """x, r (int64 scalar) -> y = Relu(x), z = Neg(x): two outputs, a 0-d input."""
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu"), helper.make_node("Neg", ["x"], ["z"], name="neg"),
         helper.make_node("Identity", ["r"], ["r_out"], name="keep_r")], "two",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", dims[1]]),
         helper.make_tensor_value_info("r", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", dims[1]]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", dims[1]]),
         helper.make_tensor_value_info("r_out", TensorProto.INT64, [])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


class _DirectPartition(_FakePartition):
    """A fake partition offering ``direct_run``: counts the calls of each path."""

    def direct_run(self, outputs):
        self.fake.direct_made += 1

        def direct(inputs: Mapping[str, Any]) -> dict[str, Any]:
            self.fake.direct_calls += 1
            outs = self._run(inputs)
            return {n: outs[n] for n in outputs}
        return direct


def _direct_backend(**attrs):
    Fake = make_fake_backend("fakedirect", {"Relu", "Neg", "Identity"}, emulated=False, fresh_outputs=True,
                             direct_made=0, direct_calls=0, **attrs)
    Fake._compile = lambda self, graph, options: _DirectPartition(self, graph)
    return Fake


def _session(dims=(2, 3), **attrs):
    Fake = _direct_backend(**attrs)
    reg = make_registry(fake_plugin(Fake))
    sess = Session(two_outputs_model(dims), ScheduleConfig(backends=["fakedirect"], backup=None), registry=reg)
    return sess, reg.backend("fakedirect").backend


def feeds(n: int = 2) -> dict[str, np.ndarray]:
    return {"x": np.arange(n * 3, dtype=np.float32).reshape(n, 3) - 2, "r": np.array(7, np.int64)}


def test_plain_runs_go_through_the_partitions_direct_run():
    sess, backend = _session()
    assert backend.direct_made == 1 and sess.executor.direct is not None
    f = feeds()
    out = sess.run(f)
    assert list(out) == ["y", "z", "r_out"]  # graph-output order
    np.testing.assert_array_equal(out["y"], np.maximum(f["x"], 0))
    np.testing.assert_array_equal(out["z"], -f["x"])
    assert backend.direct_calls == 1  # the old path never called direct_run
    sess.run(f, output_names=["z"])  # anything but a plain call takes the general path
    sess.run(f, timeout=10.0)
    assert backend.direct_calls == 1 and backend.runs == 3


def test_feeds_the_direct_test_refuses_get_the_full_checks_errors():
    sess, backend = _session()
    f = feeds()
    with pytest.raises(InputError, match="'x'.*float32"):
        sess.run({**f, "x": f["x"].astype(np.float64)})
    with pytest.raises(InputError, match="missing input.*'r'"):
        sess.run({"x": f["x"]})
    with pytest.raises(InputError, match="'x' expects a numpy array"):
        sess.run({**f, "x": f["x"].tolist()})
    with pytest.raises(InputError, match="'x'"):
        sess.run({**f, "x": f["x"].reshape(3, 2)})  # the fixed dimension 3
    with pytest.raises(InputError, match="'x'"):
        sess.run({**f, "x": f["x"].astype(">f4")})  # byte-swapped: never read as native floats
    out = sess.run({**f, "r": np.int64(7)})  # a numpy scalar: converted by the full check, then run
    assert out["r_out"] == 7
    assert backend.direct_calls == 0


def test_a_wrong_output_on_the_direct_path_is_an_execution_error():
    sess, backend = _session(output_fault=lambda outs: {**outs, "z": outs["z"].astype(np.float64)})
    with pytest.raises(ExecutionError, match="fakedirect.*float64 for output 'z'"):
        sess.run(feeds())
    assert backend.direct_calls == 1


def test_ranks_of_free_shapes_are_checked_on_the_direct_path():
    """x and its outputs declared [n, m]: only the rank is fixed, and it is still checked both ways."""
    sess, backend = _session(dims=(2, "m"))
    x = np.ones((2, 5), np.float32)
    np.testing.assert_array_equal(sess.run({"x": x, "r": np.array(1, np.int64)})["z"], -x)
    with pytest.raises(InputError, match="'x' expects rank 2"):
        sess.run({"x": np.ones(10, np.float32), "r": np.array(1, np.int64)})
    assert backend.direct_calls == 1
    bad, _ = _session(dims=(2, "m"), output_fault=lambda outs: {**outs, "y": outs["y"].reshape(-1)})
    with pytest.raises(ExecutionError, match="returned shape \\[10\\] for output 'y'"):
        bad.run({"x": x, "r": np.array(1, np.int64)})


def test_replacing_executor_run_turns_the_direct_path_off():
    sess, backend = _session()
    ex = sess.executor
    seen = []
    inner = ex.run
    ex.run = lambda f, *a: (seen.append(sorted(f)), inner(f, *a))[1]
    assert ex.direct is None
    out = sess.run(feeds())
    assert seen == [["r", "x"]] and backend.direct_calls == 0
    np.testing.assert_array_equal(out["z"], -feeds()["x"])


def test_a_partition_whose_run_was_replaced_before_the_plan_gets_no_direct_path():
    from nnrt_core.runtime.executor import ExecutionStep, Executor

    sess, _ = _session()
    st = sess.executor.steps[0]
    st.compiled.run = st.compiled.run  # an instance attribute, as a spy sets
    ex = Executor([ExecutionStep(st.compiled, st.backend, st.inputs, st.outputs)], ["y", "z", "r_out"], {},
                  ["x", "r"], feed_specs=None)
    assert ex.direct is None


# ----------------------------------------------------------- real engines
def _ort_session(**cfg):
    pytest.importorskip("onnxruntime")
    return Session(two_outputs_model(), ScheduleConfig(backends=["onnxruntime"], backup=None, **cfg))


def test_onnxruntime_direct_run_names_outputs_in_the_order_asked():
    sess = _ort_session()
    part = sess.executor.steps[0].compiled
    got = part.direct_run(["r_out", "z", "y"])(feeds())
    assert list(got) == ["r_out", "z", "y"]
    np.testing.assert_array_equal(got["z"], -feeds()["x"])


def test_onnxruntime_direct_outputs_are_safe_from_the_next_run_and_errors_name_the_partition():
    sess = _ort_session()
    assert sess.executor.direct is not None
    a = sess.run(feeds())
    keep = {k: v.copy() for k, v in a.items()}
    sess.run({"x": np.full((2, 3), 5, np.float32), "r": np.array(1, np.int64)})
    for k in keep:
        np.testing.assert_array_equal(a[k], keep[k])
    with pytest.raises(InputError, match="'x'"):
        sess.run({"x": np.ones((2, 4), np.float32), "r": np.array(1, np.int64)})


def test_onnxruntime_direct_path_follows_the_thread_budget():
    sess = _ort_session()
    part = sess.executor.steps[0].compiled
    if not part.describe().get("adaptive_threads") or CORES < 2:
        pytest.skip("needs the adaptive-thread ORT partition on a machine with 2+ cores")
    with use_thread_budget(1):
        out = sess.run(feeds(3))
    np.testing.assert_array_equal(out["y"], np.maximum(feeds(3)["x"], 0))
    assert 1 in part._by_threads  # the run went to the 1-thread session


def test_openvino_direct_path_copies_what_it_cannot_share_and_keeps_outputs():
    pytest.importorskip("openvino")
    sess = Session(two_outputs_model(), ScheduleConfig(backends=["openvino"], backup=None))
    if sess.executor.direct is None:
        pytest.skip("openvino did not take the whole model")
    x = np.arange(12, dtype=np.float32).reshape(2, 6)[:, ::2] - 3  # strided
    ro = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    ro.flags.writeable = False
    a = sess.run({"x": x, "r": np.array(3, np.int64)})
    np.testing.assert_array_equal(a["y"], np.maximum(x, 0))
    b = sess.run({"x": ro, "r": np.array(4, np.int64)})
    np.testing.assert_array_equal(b["z"], -ro)
    np.testing.assert_array_equal(a["y"], np.maximum(x, 0))  # not overwritten by the next run
    assert int(b["r_out"]) == 4
