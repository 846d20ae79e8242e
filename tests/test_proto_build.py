"""``proto_build`` (the ``onnx.helper`` / ``numpy_helper`` equivalents the
frontend and the plugins build protos with) against the public onnx API, on
the onnx conformance node cases and the light models."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import onnx.inliner
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import LIGHT_DIR
from nnrt_core.frontends.onnx import proto_build

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def node_cases():
    from onnx.backend.test.loader import load_model_tests
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [c for c in load_model_tests(kind="node") if c.model is not None]


def _light_models() -> list[onnx.ModelProto]:
    if not LIGHT_DIR.is_dir():  # pragma: no cover
        pytest.skip("onnx wheel without light models")
    return [onnx.load(str(p)) for p in sorted(LIGHT_DIR.glob("*.onnx"))]


def test_arrays_round_trip_like_numpy_helper(node_cases):
    seen: set[str] = set()
    for case in node_cases:
        for inputs, outputs in case.data_sets or []:
            for arr in [*inputs, *outputs]:
                if not isinstance(arr, np.ndarray):
                    continue
                seen.add(str(arr.dtype))
                t = numpy_helper.from_array(arr, "t")
                assert proto_build.from_array(arr, "t") == t, (case.name, arr.dtype)
                got, want = proto_build.to_array(t), numpy_helper.to_array(t)
                assert got.dtype == want.dtype and got.shape == want.shape, case.name
                assert got.tobytes() == want.tobytes() if arr.dtype != object else got.tolist() == want.tolist()
    assert {"float32", "float16", "int64", "bool", "uint8", "object", "bfloat16"} <= seen


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int16, np.uint16,
                                   np.int32, np.int64, np.uint32, np.uint64, np.bool_, np.complex64, np.complex128])
def test_typed_fields_decode_like_numpy_helper(dtype):
    """Tensors written with the typed fields (not raw_data), as older exporters do."""
    arr = (np.arange(6) % 2 if dtype == np.bool_ else np.arange(6) - (0 if np.dtype(dtype).kind == "u" else 2)) \
        .astype(dtype).reshape(2, 3)
    elem = helper.np_dtype_to_tensor_dtype(arr.dtype)
    assert proto_build.np_dtype_to_tensor_dtype(arr.dtype) == elem
    assert proto_build.tensor_dtype_to_np_dtype(elem) == helper.tensor_dtype_to_np_dtype(elem)
    vals = arr.reshape(-1).tolist() if np.dtype(dtype).kind != "c" else arr.reshape(-1)
    t = helper.make_tensor("t", elem, arr.shape, vals)
    got, want = proto_build.to_array(t), numpy_helper.to_array(t)
    assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("value, kind", [
    (3, None), (2.5, None), ("s", None), (b"b", None), ([1, 2], None), ([1.5], None), (["a", b"b"], None),
    ([], onnx.AttributeProto.INTS), ((np.int64(4),), None), (np.array([1, 2]), None),
    (np.float32(1.5), onnx.AttributeProto.FLOAT), (1, onnx.AttributeProto.FLOAT), ([1.0], onnx.AttributeProto.INTS),
    ([], None), ({1: 2}, None), (object(), None), ([object()], None),
])
def test_make_attribute_matches_helper(value, kind):
    assert _attr(proto_build.make_attribute, value, kind) == _attr(helper.make_attribute, value, kind)


def _attr(make, value, kind):
    try:
        return make("a", value, attr_type=kind).SerializeToString()
    except Exception as e:
        return type(e).__name__


def test_builders_match_helper():
    t = proto_build.from_array(np.ones((2,), np.float32), "w")
    vi = proto_build.make_tensor_value_info("x", TensorProto.FLOAT, [1, "n", None])
    assert vi == helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "n", None])
    assert proto_build.make_tensor_type_proto(1, []) == helper.make_tensor_type_proto(1, [])
    assert proto_build.make_tensor_type_proto(1, None) == helper.make_tensor_type_proto(1, None)
    seq = proto_build.make_sequence_type_proto(proto_build.make_optional_type_proto(vi.type))
    assert seq == helper.make_sequence_type_proto(helper.make_optional_type_proto(vi.type))
    node = proto_build.make_node("Add", ["x", "w"], ["y"], name="add", domain="", doc_string="d", alpha=1.0)
    assert node == helper.make_node("Add", ["x", "w"], ["y"], name="add", domain="", doc_string="d", alpha=1.0)
    out = proto_build.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = proto_build.make_graph([node], "g", [vi], [out], [t], doc_string="doc", value_info=[out])
    assert g == helper.make_graph([node], "g", [vi], [out], [t], doc_string="doc", value_info=[out])
    ops = [proto_build.make_opsetid("", 17)]
    assert proto_build.make_model(g, ops) == helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    for a in node.attribute:
        assert proto_build.get_attribute_value(a) == helper.get_attribute_value(a)


def test_to_onnx_of_light_models_round_trips(tmp_path):
    """The export (IR -> protos) through proto_build gives models the public checker accepts."""
    from nnrt_core.frontends.onnx import load_onnx, to_onnx
    for p in sorted(LIGHT_DIR.glob("*.onnx"))[:4]:
        proto = to_onnx(load_onnx(str(p)))
        onnx.checker.check_model(proto)
        assert load_onnx(proto.SerializeToString()).graph.nodes
