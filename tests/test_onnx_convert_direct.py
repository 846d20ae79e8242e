"""The converter's direct paths (plain tensors decoded without the general
checks, attributes read through a table) give what the general paths give,
and hand every doubtful tensor to them, so bad data keeps its error."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends import load_onnx
from nnrt_core.frontends.onnx import convert
from nnrt_core.ir import AttrKind, DataType, TensorType


def _tensor(dtype: int, dims: list[int], values, raw: bool) -> TensorProto:
    return helper.make_tensor("t", dtype, dims, values, raw=raw)


@pytest.mark.parametrize("raw", [False, True])
@pytest.mark.parametrize("dtype,values,dims", [
    (TensorProto.FLOAT, [1.5, -2.0, 3.25, 0.0, 7.0, 8.5], [2, 3]),
    (TensorProto.DOUBLE, [1e300, -2.0], [2]),
    (TensorProto.INT32, [1, -(1 << 31), (1 << 31) - 1], [3]),
    (TensorProto.INT64, [-(1 << 63), (1 << 63) - 1, 0, 5], [2, 1, 2]),
    (TensorProto.FLOAT, [4.0], []),
    (TensorProto.INT64, [], [0, 3]),
])
def test_direct_decoding_matches_numpy_helper(dtype, values, dims, raw):
    np_dtype = {TensorProto.FLOAT: np.float32, TensorProto.DOUBLE: np.float64,
                TensorProto.INT32: np.int32, TensorProto.INT64: np.int64}[dtype]
    values = np.array(values, dtype=np_dtype).reshape(dims)
    t = _tensor(dtype, dims, values.tobytes() if raw else values.ravel().tolist(), raw)
    got = convert.direct_array(t)
    assert got is not None
    want = numpy_helper.to_array(t)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(convert.tensor_to_array(t), got)


def test_doubtful_tensors_left_to_the_general_path():
    short = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4], float_data=[1.0, 2.0])
    neg = TensorProto(name="n", data_type=TensorProto.FLOAT, dims=[-1], float_data=[1.0])
    raw = TensorProto(name="r", data_type=TensorProto.INT64, dims=[2], raw_data=b"\0" * 12)
    huge = TensorProto(name="h", data_type=TensorProto.FLOAT, dims=[1 << 30, 1 << 30], raw_data=b"\0" * 4)
    f16 = helper.make_tensor("f", TensorProto.FLOAT16, [2], np.array([1, 2], np.float16).tobytes(), raw=True)
    for t in (short, neg, raw, huge, f16):
        assert convert.direct_array(t) is None
    with pytest.raises(ModelLoadError, match="tensor 'w' could not be decoded"):
        convert.tensor_to_array(short)
    with pytest.raises(ModelLoadError, match="negative dimension"):
        convert.tensor_to_array(neg)
    with pytest.raises(ModelLoadError, match="holds 12 bytes"):
        convert.tensor_to_array(raw)
    with pytest.raises(ModelLoadError, match="above the limit"):
        convert.tensor_to_array(huge)


def test_constant_with_short_data_refused_by_load():
    bad = TensorProto(name="v", data_type=TensorProto.FLOAT, dims=[3], float_data=[1.0])
    g = helper.make_graph([helper.make_node("Constant", [], ["y"], value=bad)], "g", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ModelLoadError, match=r"node '#0' \(Constant\): attribute 'value': tensor 'v' could not"):
        load_onnx(m, check=False, infer_shapes=False)


def test_every_attribute_kind_read_as_before():
    t = numpy_helper.from_array(np.arange(3, dtype=np.float32), "c")
    node = helper.make_node(
        "Custom", ["x"], ["y"], domain="my.domain", f=0.5, i=-7, s="é", ints=[1, -2], floats=[0.25, 1.0],
        strings=["a", "b"], t=t, ts=[t, t], tp=helper.make_tensor_type_proto(TensorProto.INT64, [2, "n"]))
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.domain", 1)])
    attrs = load_onnx(m, check=False, infer_shapes=False).graph.nodes[0].attributes
    assert attrs["f"].kind == AttrKind.FLOAT and attrs["f"].value == 0.5
    assert attrs["i"].kind == AttrKind.INT and attrs["i"].value == -7 and type(attrs["i"].value) is int
    assert attrs["s"].value == "é"
    assert attrs["ints"].value == [1, -2] and all(type(v) is int for v in attrs["ints"].value)
    assert attrs["floats"].value == [0.25, 1.0] and attrs["strings"].value == ["a", "b"]
    np.testing.assert_array_equal(attrs["t"].value, np.arange(3, dtype=np.float32))
    assert [a.shape for a in attrs["ts"].value] == [(3,), (3,)]
    assert attrs["tp"].value == TensorType(DataType.INT64, (2, "n"))


def test_unsupported_attribute_kind_named():
    node = helper.make_node("Custom", ["x"], ["y"], domain="my.domain")
    a = node.attribute.add()
    a.name, a.type = "sp", AttrKind.SPARSE_TENSORS
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.domain", 1)])
    with pytest.raises(ModelLoadError, match=r"node '#0' \(Custom\): attribute 'sp' has unsupported kind "
                                             "SPARSE_TENSORS"):
        load_onnx(m, check=False, infer_shapes=False)


@pytest.mark.parametrize("dim,want", [(5, 5), (-1, None), ("n", "n"), ("?", None), ("", None)])
def test_dims_read_as_before(dim, want):
    tp = helper.make_tensor_type_proto(TensorProto.FLOAT, [dim] if dim != "" else [None])
    assert convert.type_from_proto(tp) == TensorType(DataType.FLOAT, (want,))


def _split_model(outputs: list[list[str]], num_outputs: int = 2) -> object:
    nodes = [helper.make_node("Split", ["x"], outs, axis=0, num_outputs=num_outputs, name=f"s{i}")
             for i, outs in enumerate(outputs)]
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for group in outputs for o in group]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])], outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def test_validation_memo_never_passes_a_node_that_differs():
    """Alike nodes are checked once; one that differs in what the checks read
    (here its output count) is checked, and named, after them, every time."""
    good = _split_model([["a", "b"], ["c", "d"]])
    load_onnx(good, check=False)
    bad = _split_model([["a", "b"], ["c", "d", "e"]])
    for _ in range(2):
        with pytest.raises(ModelLoadError, match=r"node 's1' \(Split\): attribute 'num_outputs' is 2 but the node "
                                                 "has 3 outputs"):
            load_onnx(bad, check=False)


def test_validation_memo_keys_attribute_values():
    load_onnx(_split_model([["a", "b"]]), check=False)
    with pytest.raises(ModelLoadError, match=r"node 's0' \(Split\): attribute 'num_outputs' is 0; expected values "
                                             ">= 1"):
        load_onnx(_split_model([["a", "b"]], num_outputs=0), check=False)


def _unsorted_model(extra: list | None = None) -> object:
    nodes = [helper.make_node("Relu", ["m"], ["y"], name="relu"), helper.make_node("Neg", ["x"], ["m"], name="neg")]
    g = helper.make_graph(nodes + (extra or []), "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("check", [True, False])
def test_unsorted_graph_sorted_with_or_without_the_checker(check):
    """The order is checked only when the checker refuses the graph (or is off)."""
    m = _unsorted_model()
    before = m.SerializeToString()
    assert [n.name for n in load_onnx(m, check=check).graph.nodes] == ["neg", "relu"]
    assert m.SerializeToString() == before  # sorted on a copy


def test_unsorted_graph_with_another_fault_gets_the_checkers_message_after_sorting():
    bad = helper.make_node("Relu", ["nowhere"], ["z"], name="orphan")  # reads a name nothing defines
    with pytest.raises(ModelLoadError, match=r"ONNX model is invalid: .*nowhere"):
        load_onnx(_unsorted_model([bad]))


def test_cycle_refused_by_the_checker():
    nodes = [helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
             helper.make_node("Abs", ["b"], ["y"])]
    g = helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ModelLoadError, match="ONNX model is invalid: .*topologically sorted"):
        load_onnx(m)
