"""frontends/onnx/schema_facts.py: the plain copy of an onnx OpSchema that node validation reads."""
from __future__ import annotations

import onnx
import pytest

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends.onnx.schema_facts import schema_facts
from nnrt_core.frontends.onnx.validate import NodeView, validate_node


@pytest.mark.parametrize("op, opset", [("Conv", 11), ("Concat", 13), ("Split", 18), ("Add", 14), ("If", 16)])
def test_facts_agree_with_the_onnx_schema(op, opset):
    s = onnx.defs.get_schema(op, opset, "")
    f = schema_facts(op, "", opset)
    assert (f.since_version, f.min_input, f.max_input, f.min_output, f.max_output) == \
        (s.since_version, s.min_input, s.max_input, s.min_output, s.max_output)
    assert [(p.name, p.type_str, p.is_homogeneous) for p in f.inputs] == \
        [(p.name, p.type_str, p.is_homogeneous) for p in s.inputs]
    variadic = onnx.defs.OpSchema.FormalParameterOption.Variadic
    assert [p.variadic for p in f.inputs] == [p.option == variadic for p in s.inputs]
    assert f.attributes == {k: int(a.type) for k, a in s.attributes.items()}
    assert f.allowed == {c.type_param_str: frozenset(c.allowed_type_strs) for c in s.type_constraints}
    assert schema_facts(op, "", opset) is f  # computed once


def test_unknown_op_has_no_facts():
    assert schema_facts("NoSuchOp", "", 13) is None


def test_checks_read_the_facts():
    """Arity, attribute kinds and element types still fail with the same messages."""
    conv = NodeView("node 'c' (Conv)", "Conv", "", ["x"], ["y"], {}, ())
    with pytest.raises(ModelLoadError, match=r"has 1 inputs; Conv-11 expects 2 to 3"):
        validate_node(conv, {"": 13})
    attr = NodeView("node 'c' (Conv)", "Conv", "", ["x", "w"], ["y"], {"group": (onnx.AttributeProto.FLOAT, 1.0)}, ())
    with pytest.raises(ModelLoadError, match=r"attribute 'group' is of type FLOAT; expected INT"):
        validate_node(attr, {"": 13})
    add = NodeView("node 'a' (Add)", "Add", "", ["a", "b"], ["y"], {},
                   (onnx.TensorProto.FLOAT, onnx.TensorProto.INT64))
    with pytest.raises(ModelLoadError, match=r"input 1 \('B'\) has element type int64 but input 0 has float"):
        validate_node(add, {"": 14})
    concat = NodeView("node 'k' (Concat)", "Concat", "", ["a", ""], ["y"], {"axis": (onnx.AttributeProto.INT, 0)}, ())
    with pytest.raises(ModelLoadError, match=r"input 1 \(of variadic 'inputs'\) is empty"):
        validate_node(concat, {"": 13})
