"""The fresh-process build shortcuts (docs/runtime.md, "Build stages"): the
ONNX checker and shape inference read the file's own bytes while the parsed
proto still says the same, and the same checks refuse the same bad models."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends import load_onnx
from nnrt_core.frontends.onnx import onnx_lite


@pytest.fixture
def seen(monkeypatch):
    """What the checker and shape inference were handed: ("check"|"infer", bytes or proto)."""
    calls: list[tuple[str, object]] = []
    check, infer = onnx_lite.check_model, onnx_lite.infer_shapes

    def spy_check(model, *a, **k):
        calls.append(("check", model))
        return check(model, *a, **k)

    def spy_infer(model, *a, **k):
        calls.append(("infer", model))
        return infer(model, *a, **k)

    monkeypatch.setattr(onnx_lite, "check_model", spy_check)
    monkeypatch.setattr(onnx_lite, "infer_shapes", spy_infer)
    return calls


def _model(dims=(1, 4), nodes=None) -> onnx.ModelProto:
    nodes = nodes or [helper.make_node("Relu", ["x"], ["h"], name="r"), helper.make_node("Neg", ["h"], ["y"], name="n")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * len(dims))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_file_bytes_go_to_the_checker_and_inference_unserialized(tmp_path, light_dir, seen):
    path = light_dir / "light_squeezenet.onnx"
    model = load_onnx(path)
    data = path.read_bytes()
    assert [k for k, _ in seen] == ["check", "infer"]
    assert all(arg is not None and isinstance(arg, bytes) and arg == data for _, arg in seen)
    seen.clear()
    again = load_onnx(data)  # bytes: the same
    assert [isinstance(arg, bytes) for _, arg in seen] == [True, True]
    assert [n.op_type for n in again.graph.nodes] == [n.op_type for n in model.graph.nodes]
    assert [v.type for n in again.graph.nodes for v in n.outputs] == \
        [v.type for n in model.graph.nodes for v in n.outputs]


def test_a_changed_proto_is_serialized_again(seen):
    data = _model(dims=("N", 4)).SerializeToString()
    model = load_onnx(data, input_shapes={"x": [3, 4]})  # the input shape changed: inference must see it
    assert [(k, isinstance(a, bytes)) for k, a in seen] == [("check", True), ("infer", False)]
    assert model.graph.outputs[0].type.shape == (3, 4)
    seen.clear()
    bad_dims = _model()
    bad_dims.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -1  # cleared to unknown before inference
    load_onnx(bad_dims.SerializeToString())
    assert [(k, isinstance(a, bytes)) for k, a in seen] == [("check", True), ("infer", False)]


def test_an_unsorted_file_is_checked_again_after_sorting_as_a_proto(seen):
    m = _model(nodes=[helper.make_node("Neg", ["h"], ["y"], name="n"), helper.make_node("Relu", ["x"], ["h"], name="r")])
    model = load_onnx(m.SerializeToString())
    assert [n.name for n in model.graph.nodes] == ["r", "n"]
    assert [(k, isinstance(a, bytes)) for k, a in seen] == [("check", True), ("check", False), ("infer", False)]


def test_external_data_files_are_not_handed_over_as_bytes(tmp_path, seen):
    m = _model(nodes=[helper.make_node("Add", ["x", "w"], ["y"], name="a")])
    w = np.arange(4096, dtype=np.float32).reshape(1, 4096)
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 4096
    m.graph.initializer.append(onnx.numpy_helper.from_array(w, "w"))
    path = tmp_path / "m.onnx"
    onnx.save_model(m, str(path), save_as_external_data=True, location="m.data", size_threshold=0)
    model = load_onnx(path)
    assert not any(isinstance(a, bytes) for _, a in seen)
    (add,) = model.graph.nodes
    np.testing.assert_array_equal(add.inputs[1].const, w)


@pytest.mark.parametrize("edit, msg", [
    (lambda m: m.graph.node[0].input.append("nope"), "ONNX model is invalid"),
    (lambda m: setattr(m.graph.node[0], "op_type", "NoSuchOp"), "ONNX model is invalid"),
])
def test_bad_files_still_get_the_checkers_error(tmp_path, edit, msg):
    m = _model()
    edit(m)
    path = tmp_path / "bad.onnx"
    path.write_bytes(m.SerializeToString())
    for source in (path, path.read_bytes(), m):
        with pytest.raises(ModelLoadError, match=msg):
            load_onnx(source)
