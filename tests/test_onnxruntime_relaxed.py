"""ONNX Runtime type-checks dead If branches with the static shapes of the
values they read; a partition that fails that way is compiled again with ranks
only (silero-vad's If/LSTM under ``input_shapes`` did), visibly."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

from nnrt_core import ScheduleConfig, Session
from nnrt_onnxruntime import backend as ort_backend
from nnrt_onnxruntime.export import relax_static_shapes


def _if_model():
    then = h.make_graph([h.make_node("Relu", ["x"], ["t"])], "then", [],
                        [h.make_tensor_value_info("t", T.FLOAT, [2, 3])])
    other = h.make_graph([h.make_node("Neg", ["x"], ["e"])], "else", [],
                         [h.make_tensor_value_info("e", T.FLOAT, [2, 3])])
    g = h.make_graph([h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="if")], "m",
                     [h.make_tensor_value_info("c", T.BOOL, []), h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def test_relax_keeps_types_and_ranks_only():
    m = _if_model()
    assert relax_static_shapes(m) == 2 + 2 + 2 + 2  # x, y and both branch outputs
    for vi in [*m.graph.input[1:], *m.graph.output, m.graph.node[0].attribute[0].g.output[0]]:
        dims = vi.type.tensor_type.shape.dim
        assert len(dims) == 2 and not any(d.HasField("dim_value") or d.HasField("dim_param") for d in dims)
        assert vi.type.tensor_type.elem_type == T.FLOAT
    onnx.checker.check_model(m)


def test_partition_failing_type_inference_is_compiled_with_ranks_only(monkeypatch):
    real = ort_backend.OrtPartition
    tried = []

    def picky(backend, name, inputs, outputs, model, *args, **kwargs):
        static = any(d.HasField("dim_value") for i in onnx.load_from_string(model).graph.input
                     for d in i.type.tensor_type.shape.dim)
        tried.append(static)
        if static:
            raise RuntimeError("[ONNXRuntimeError] : 1 : FAIL : Node (if) Op (If) [TypeInferenceError] "
                               "Graph attribute inferencing failed")
        return real(backend, name, inputs, outputs, model, *args, **kwargs)

    monkeypatch.setattr(ort_backend, "OrtPartition", picky)
    sess = Session(_if_model(), ScheduleConfig(backends=["onnxruntime"], backup="numpy"))
    assert tried == [True, False]
    assert set(sess.placement.values()) == {"onnxruntime"}
    assert not [e for e in sess.events if e.kind == "compile_fallback"]
    assert "ranks only" in sess.partitions[0].details["shapes"]
    x = np.array([[1, -2, 3], [-4, 5, -6]], np.float32)
    np.testing.assert_array_equal(sess.run({"c": np.array(True), "x": x})["y"], np.maximum(x, 0))
    np.testing.assert_array_equal(sess.run({"c": np.array(False), "x": x})["y"], -x)


def test_other_compile_errors_are_not_retried(monkeypatch):
    calls = []

    def broken(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("out of memory")

    monkeypatch.setattr(ort_backend, "OrtPartition", broken)
    sess = Session(_if_model(), ScheduleConfig(backends=["onnxruntime"], backup="numpy"))
    assert len(calls) == 1 and set(sess.placement.values()) == {"numpy"}
    assert [e.kind for e in sess.events if e.kind == "compile_fallback"] == ["compile_fallback"]
    assert "shapes" not in sess.partitions[0].details
