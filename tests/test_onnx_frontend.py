"""ONNX import/export: round trips, external data safety, bad files."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends import load_onnx, to_onnx
from nnrt_core.ir import AttrKind, DataType, SequenceType


@pytest.mark.parametrize("name", ["squeezenet", "resnet50", "shufflenet", "inception_v2"])
def test_light_model_round_trip(light_dir, name):
    path = light_dir / f"light_{name}.onnx"
    original = onnx.load(str(path))
    model = load_onnx(path)
    model.graph.validate()
    assert len(model.graph.nodes) == len(original.graph.node)
    assert model.opset_imports == {"": original.opset_import[0].version}
    proto = to_onnx(model, ir_version=10)
    onnx.checker.check_model(proto)
    assert proto.ir_version <= 10
    assert [n.op_type for n in proto.graph.node] == [n.op_type for n in original.graph.node]
    inits = {t.name: numpy_helper.to_array(t) for t in original.graph.initializer}
    exported = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    assert inits.keys() == exported.keys()
    for k, v in inits.items():
        np.testing.assert_array_equal(exported[k], v)
    # shape inference typed every intermediate value that something reads
    read = [v for n in model.graph.nodes for v in n.outputs if v.uses or v in model.graph.outputs]
    assert read and all(v.type is not None and v.type.shape is not None for v in read)


def _if_model() -> onnx.ModelProto:
    then_g = helper.make_graph([helper.make_node("Relu", ["y"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
    else_g = helper.make_graph([helper.make_node("Neg", ["y"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    nodes = [helper.make_node("Neg", ["x"], ["y"], name="neg"),
             helper.make_node("If", ["c"], ["out"], name="if", then_branch=then_g, else_branch=else_g)]
    g = helper.make_graph(nodes, "main",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                           helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_subgraphs_resolve_outer_scope_and_round_trip():
    model = load_onnx(_if_model())
    neg, if_node = model.graph.nodes
    then_g = if_node.attr("then_branch")
    assert if_node.attributes["then_branch"].kind == AttrKind.GRAPH
    assert then_g.parent is model.graph
    assert then_g.nodes[0].inputs[0] is neg.outputs[0]
    assert if_node.outer_inputs() == [neg.outputs[0]]
    back = to_onnx(model)
    onnx.checker.check_model(back)
    assert back.graph.node[1].attribute[0].g.node[0].input == ["y"]


def test_sequence_types_imported():
    g = helper.make_graph(
        [helper.make_node("SequenceLength", ["s"], ["n"])], "g",
        [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("n", TensorProto.INT64, [])])
    model = load_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert isinstance(model.graph.inputs[0].type, SequenceType)
    assert model.graph.outputs[0].dtype is DataType.INT64


def _external_model(tmp_path, location: str, length: int | None = None) -> str:
    w = np.arange(6, dtype=np.float32)
    (tmp_path / "weights.bin").write_bytes(w.tobytes())
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[6])
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value=location)
    if length is not None:
        t.external_data.add(key="length", value=str(length))
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])], [t])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "model.onnx"
    path.write_bytes(m.SerializeToString())
    return str(path)


def test_external_data_inside_folder_loads(tmp_path):
    model = load_onnx(_external_model(tmp_path, "weights.bin"), check=False)
    np.testing.assert_array_equal(model.graph.initializers["w"].const, np.arange(6, dtype=np.float32))


@pytest.mark.parametrize("location,match", [
    ("../weights.bin", "escapes the model folder"),
    ("sub/../../weights.bin", "escapes the model folder"),
    ("/etc/passwd", "must be a relative path"),
    ("missing.bin", "not found"),
])
def test_external_data_paths_refused(tmp_path, location, match):
    folder = tmp_path / "m"
    folder.mkdir()
    with pytest.raises(ModelLoadError, match=match):
        load_onnx(_external_model(folder, location), check=False)


def test_external_data_length_mismatch_refused(tmp_path):
    with pytest.raises(ModelLoadError, match="declares 24 bytes"):
        load_onnx(_external_model(tmp_path, "weights.bin", length=20), check=False)


def test_absurd_tensor_size_refused_before_allocation():
    t = TensorProto(name="huge", data_type=TensorProto.FLOAT, dims=[1 << 20, 1 << 20, 1 << 10])
    t.raw_data = b"\0" * 16
    g = helper.make_graph([helper.make_node("Identity", ["huge"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [t])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ModelLoadError, match="above the limit"):
        load_onnx(m, check=False)


def test_raw_data_size_mismatch_refused():
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    t.raw_data = b"\0" * 8
    g = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [t])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ModelLoadError, match="holds 8 bytes"):
        load_onnx(m, check=False)


def test_garbage_bytes_and_missing_file(tmp_path):
    with pytest.raises(ModelLoadError, match="not a valid ONNX protobuf|holds no ONNX graph"):
        load_onnx(b"\xff\xfe this is not a model")
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_onnx(tmp_path / "nope.onnx")
    with pytest.raises(ModelLoadError, match="cannot load a model from int"):
        load_onnx(42)  # type: ignore[arg-type]


def test_invalid_graph_names_node():
    g = helper.make_graph([helper.make_node("Relu", ["nowhere"], ["y"], name="bad_relu")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ModelLoadError, match="nowhere"):
        load_onnx(m)
    with pytest.raises(ModelLoadError, match="bad_relu"):
        load_onnx(m, check=False)
