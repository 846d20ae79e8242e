"""Graph outputs whose declared shapes contradict what the graph computes
(issue 31, regression 1): corrected at import with a visible event, checked
against the computed shapes, compared at run time where only the file says
so -- and a faulty plugin is still caught."""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from conftest import make_registry
from fakes import fake_plugin, make_fake_backend
from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import ExecutionError, ModelLoadError
from nnrt_core.frontends.onnx.declared_outputs import merge_shapes

BACKENDS = [["numpy"], ["onnxruntime"]]


def expanded(declared: list[Any] = [1, "seqlen"], elem: int = T.FLOAT) -> onnx.ModelProto:  # noqa: B006
    """x[1, seqlen] -> Unsqueeze -> Expand to [32, 1, seqlen] -> Relu -> y, with y declared ``declared``
    (a vocoder-like output whose file declares the input's shape)."""
    nodes = [h.make_node("Unsqueeze", ["x", "axes"], ["u"], name="unsq"),
             h.make_node("Expand", ["u", "to"], ["e"], name="expand"),
             h.make_node("Relu", ["e"], ["y"], name="relu")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, "seqlen"])],
                     [h.make_tensor_value_info("y", elem, declared)],
                     [h.make_tensor("axes", T.INT64, [1], [0]), h.make_tensor("to", T.INT64, [3], [32, 1, 1])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def reshaped(declared: list[Any] = [1, "seqlen"]) -> onnx.ModelProto:  # noqa: B006
    """y = Relu(Reshape(x, s)) with the target shape a feed of unknown length:
    the output's shape (even its rank) is known only at run time."""
    nodes = [h.make_node("Reshape", ["x", "s"], ["r"], name="reshape"), h.make_node("Relu", ["r"], ["y"], name="relu")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, "seqlen"]),
                                  h.make_tensor_value_info("s", T.INT64, ["n"])],
                     [h.make_tensor_value_info("y", T.FLOAT, declared)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def ort_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    so = ort.SessionOptions()
    so.log_severity_level = 3  # its MergeShapeInfo / VerifyOutputSizes warnings
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def kinds(sess: Session, kind: str) -> list[str]:
    return [e.message for e in sess.events if e.kind == kind]


X = {"x": np.linspace(-1, 1, 10, dtype=np.float32)[None]}


@pytest.mark.parametrize("backends", BACKENDS)
def test_a_contradicted_declaration_is_corrected_with_an_event_and_runs_like_ort(backends):
    model = expanded()
    sess = Session(model, ScheduleConfig(backends=backends))
    got = sess.run(X)["y"]
    np.testing.assert_array_equal(got, ort_run(model, X))
    assert got.shape == (32, 1, 10)
    (msg,) = kinds(sess, "declared_shape_corrected")
    assert "'y'" in msg and "float[1,seqlen]" in msg and "float[32,1,seqlen]" in msg, msg
    assert sess.outputs[0].shape == (32, 1, "seqlen")  # what the user is told is what the graph computes
    assert not kinds(sess, "declared_shape_mismatch")
    # a contradicted fixed size in the same rank is a correction too
    sess = Session(expanded([32, 2, "seqlen"]), ScheduleConfig(backends=backends))
    assert sess.run(X)["y"].shape == (32, 1, 10)
    (msg,) = kinds(sess, "declared_shape_corrected")
    assert "float[32,2,seqlen]" in msg and "float[32,1,seqlen]" in msg, msg


def test_agreeing_declarations_are_kept_as_they_are_with_no_event():
    for declared, shown in [([32, 1, "seqlen"], (32, 1, "seqlen")), ([32, 1, "frames"], (32, 1, "frames")),
                            ([32, "b", 10], (32, 1, "seqlen"))]:  # 10: only the run can tell
        sess = Session(expanded(declared), ScheduleConfig(backends=["numpy"]))
        assert sess.outputs[0].shape == shown, declared
        assert not kinds(sess, "declared_shape_corrected") and not kinds(sess, "declared_shape_mismatch")
        assert sess.run(X)["y"].shape == (32, 1, 10)


def test_another_element_type_is_a_load_error_naming_the_output():
    with pytest.raises(ModelLoadError, match=r"graph output 'y' is declared int64\[1,seqlen\] but its graph "
                                             r"computes float"):
        Session(expanded(elem=T.INT64), ScheduleConfig(backends=["numpy"]))


@pytest.mark.parametrize("backends", BACKENDS)
def test_a_declaration_only_the_run_can_check_is_compared_at_run_time_like_ort(backends):
    model = reshaped()
    sess = Session(model, ScheduleConfig(backends=backends))
    assert not sess.events  # nothing to say before a run
    fits = {"x": X["x"][:, :6], "s": np.array([1, 6], np.int64)}
    np.testing.assert_array_equal(sess.run(fits)["y"], ort_run(model, fits))
    assert not kinds(sess, "declared_shape_mismatch")
    feeds = {"x": np.linspace(-1, 1, 12, dtype=np.float32)[None], "s": np.array([3, 1, 4], np.int64)}
    got = sess.run(feeds)["y"]  # ONNX Runtime returns it (VerifyOutputSizes warns): so do we
    np.testing.assert_array_equal(got, ort_run(model, feeds))
    (msg,) = kinds(sess, "declared_shape_mismatch")
    assert "'y'" in msg and "[3, 1, 4]" in msg and "float[1,seqlen]" in msg, msg
    sess.run(feeds)
    assert len(kinds(sess, "declared_shape_mismatch")) == 1  # once per output, not per run


def _wrong_shape(outs: dict[str, Any]) -> dict[str, Any]:
    """A faulty plugin: drops the leading axis of what it computed."""
    return {k: np.ascontiguousarray(v[0]) for k, v in outs.items()}


def test_a_faulty_plugin_is_still_caught_against_the_computed_shape():
    bad = make_fake_backend("bad", ["Relu"], output_fault=_wrong_shape)
    sess = Session(expanded(), ScheduleConfig(backends=["bad"], backup="numpy", pins={"relu": "bad"}),
                   registry=make_registry(fake_plugin(bad)))
    assert sess.placement["relu"] == "bad"
    with pytest.raises(ExecutionError, match=r"backend 'bad' partition 'p\d+_bad' returned shape \[1, 10\] for "
                                             r"output 'y'; declared float\[32,1,seqlen\]"):
        sess.run(X)


def test_merge_rules():
    assert merge_shapes((1, "seqlen"), (32, 1, "seqlen")) == ((32, 1, "seqlen"), True, False)
    assert merge_shapes((1, "n"), (2, "n")) == ((2, "n"), True, False)
    assert merge_shapes((1, "n"), ("unk__0", 7)) == (("unk__0", 7), False, True)  # 1 only declared
    assert merge_shapes(("b", "n"), (None, 7)) == (("b", 7), False, False)
    assert merge_shapes((1, "n"), None) == (None, False, True)
    assert merge_shapes((), ()) == ((), False, False)
