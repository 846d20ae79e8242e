"""``validate_model``'s two walks on the load path (docs/runtime.md, "Build
stages"): the structure walk keeps what it read of each node, and the
types-only check after shape inference reads only the inferred types; the
same errors as a full walk, and a full walk wherever the nodes could differ."""
from __future__ import annotations

import pytest
from onnx import TensorProto, helper

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends import load_onnx
from nnrt_core.frontends.onnx import onnx_api, validate_model, validate_proto


def _model(nodes, inputs, outputs, opset: int = 17):
    g = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _cast_then_sqrt():
    """Sqrt of a value whose int64 type only shape inference tells (Sqrt takes floats)."""
    return _model([helper.make_node("Cast", ["x"], ["c"], name="cast", to=TensorProto.INT64),
                   helper.make_node("Sqrt", ["c"], ["y"], name="sqrt")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                  [helper.make_tensor_value_info("y", TensorProto.INT64, [2])])


def _message(fn) -> str:
    with pytest.raises(ModelLoadError) as e:
        fn()
    return str(e.value)


def test_a_walk_finds_the_type_error_a_full_walk_finds():
    m = _cast_then_sqrt()
    walk = validate_model(m)  # the structure is fine
    assert walk is not None and [n[0] for n in walk.nodes] == ["Cast", "Sqrt"]
    inferred = onnx_api.infer_shapes(m, strict_mode=False, data_prop=True)
    full = _message(lambda: validate_model(inferred, types=True, structure=False))
    walked = _message(lambda: validate_model(inferred, types=True, structure=False, walk=walk))
    assert walked == full and "node 'sqrt' (Sqrt)" in full and "int64" in full
    assert _message(lambda: load_onnx(m)) == f"{full}"


def test_unknown_element_types_are_refused_on_the_walk_too():
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [helper.make_tensor_value_info("x", 1, [2])],
               [helper.make_tensor_value_info("y", 1, [2])])
    walk = validate_model(m)
    m.graph.value_info.append(helper.make_tensor_value_info("y2", 1, [2]))
    m.graph.value_info[-1].type.tensor_type.elem_type = 99
    with pytest.raises(ModelLoadError, match="unknown element type 99"):
        validate_model(m, types=True, structure=False, walk=walk)


def test_the_load_path_walks_the_nodes_once(monkeypatch):
    calls = []
    walk_graph = validate_proto._validate_proto_graph

    def spy(g, opsets, types, structure=True, walk=None):
        calls.append(structure)
        return walk_graph(g, opsets, types, structure, walk)

    monkeypatch.setattr(validate_proto, "_validate_proto_graph", spy)
    m = load_onnx(_model([helper.make_node("Relu", ["x"], ["h"], name="r"), helper.make_node("Neg", ["h"], ["y"])],
                         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]))
    assert calls == [True]  # the types-only check read the walk, not the nodes
    assert m.graph.nodes[1].outputs[0].type.dtype.name == "FLOAT"


def test_sub_graphs_and_changed_graphs_are_walked_in_full():
    then_g = helper.make_graph([helper.make_node("Cast", ["x"], ["c"], to=TensorProto.INT64),
                                helper.make_node("Sqrt", ["c"], ["t"], name="inner_sqrt")], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.INT64, [2])])
    else_g = helper.make_graph([helper.make_node("Cast", ["x"], ["e"], to=TensorProto.INT64)], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.INT64, [2])])
    m = _model([helper.make_node("If", ["b"], ["y"], name="if", then_branch=then_g, else_branch=else_g)],
               [helper.make_tensor_value_info("b", TensorProto.BOOL, []),
                helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
               [helper.make_tensor_value_info("y", TensorProto.INT64, [2])])
    assert validate_model(m) is None  # no walk: the inner types live in the sub-graphs
    assert "node 'inner_sqrt' (Sqrt)" in _message(lambda: load_onnx(m))
    # a walk of other nodes (here: one node fewer) is not trusted: a full walk decides
    sqrt = _cast_then_sqrt()
    short = _model([helper.make_node("Cast", ["x"], ["c"], name="cast", to=TensorProto.INT64)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("c", TensorProto.INT64, [2])])
    inferred = onnx_api.infer_shapes(sqrt, strict_mode=False, data_prop=True)
    with pytest.raises(ModelLoadError, match="node 'sqrt' \\(Sqrt\\)"):
        validate_model(inferred, types=True, structure=False, walk=validate_model(short))
