"""``nnrt_core.frontends.onnx.wire``: the initializers of ONNX bytes read
without onnx, against onnx's own parse, and malformed bytes refused."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import LIGHT_DIR
from nnrt_core.frontends.onnx.wire import EXTERNAL, nested_external_tensors, read_initializers, tensor_dtype_to_np_dtype


def _fields(t):
    return (t.name, t.data_type, list(t.dims), t.data_location, [(e.key, e.value) for e in t.external_data])


def _external_model() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.zeros((3, 4), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "weights.bin"), ("offset", "64"), ("length", "48")):
        w.external_data.add(key=k, value=v)
    odd = helper.make_tensor("naïve ✓", TensorProto.INT64, [0, 2**40], [])  # big dims, a UTF-8 name
    neg = TensorProto(name="neg", data_type=TensorProto.FLOAT, dims=[-1, 2])
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], [w, odd, neg])
    return helper.make_model(g)


def test_initializers_match_onnx_on_light_models_and_external_data():
    models = [onnx.load(str(p), load_external_data=False) for p in sorted(LIGHT_DIR.glob("*.onnx"))[:5]]
    models.append(_external_model())
    for m in models:
        got = [_fields(t) for t in read_initializers(m.SerializeToString())]
        assert got == [_fields(t) for t in m.graph.initializer]
    ext = read_initializers(_external_model().SerializeToString())[0]
    assert ext.data_location == EXTERNAL == TensorProto.EXTERNAL


def test_a_repeated_graph_field_merges_like_protobuf():
    a, b = _external_model(), _external_model()
    b.graph.initializer[0].name = "w2"
    data = a.SerializeToString() + b.SerializeToString()  # concatenated messages merge
    assert [t.name for t in read_initializers(data)] == [t.name for t in onnx.ModelProto.FromString(data)
                                                         .graph.initializer]


@pytest.mark.parametrize("data", [b"\x3a", b"\x3a\x05\x2a\x01", b"\x3a\x02\x2a\xff", b"\x3b\x00",
                                  b"\x3a\x03\x2a\x01\x42", b"\x00\x01", b"\x3a\x02\x2a\x00" + b"\xff" * 11])
def test_malformed_bytes_raise_value_error(data):
    with pytest.raises(ValueError):
        read_initializers(data)


def test_element_types_map_like_onnx_helper():
    for elem in (1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16):
        assert tensor_dtype_to_np_dtype(elem) == helper.tensor_dtype_to_np_dtype(elem)
    with pytest.raises(ValueError):
        tensor_dtype_to_np_dtype(999)


def _external(name: str) -> TensorProto:
    t = numpy_helper.from_array(np.zeros(4, np.float32), name)
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "w.bin"), ("offset", "0"), ("length", "16")):
        t.external_data.add(key=k, value=v)
    return t


def test_nested_external_tensors_finds_sub_graph_attribute_and_sparse_weights_only():
    vi = helper.make_tensor_value_info
    branch = helper.make_graph([helper.make_node("Identity", ["b_w"], ["o"])], "b", [],
                               [vi("o", TensorProto.FLOAT, [4])], [_external("b_w")])
    loop_body = helper.make_graph([helper.make_node("Constant", [], ["c"], value=_external("attr_w"))], "lb", [],
                                  [vi("c", TensorProto.FLOAT, [4])])
    sparse = helper.make_sparse_tensor(_external("sp_values"), numpy_helper.from_array(np.arange(4), "sp_idx"), [8])
    g = helper.make_graph([helper.make_node("If", ["cond"], ["y"], then_branch=branch, else_branch=loop_body)], "g",
                          [vi("cond", TensorProto.BOOL, [])], [vi("y", TensorProto.FLOAT, [4])],
                          [_external("top_w")], sparse_initializer=[sparse])
    model = helper.make_model(g)
    assert sorted(nested_external_tensors(model.SerializeToString())) == ["attr_w", "b_w", "sp_values"]
    assert nested_external_tensors(_external_model().SerializeToString()) == []  # top-level weights only


def test_nested_external_tensors_refuses_malformed_bytes():
    with pytest.raises(ValueError):
        nested_external_tensors(b"\x3a\x05\x0a\x01")
