"""``onnx_lite`` (the onnx wheel's extension and protos loaded by path) and
``proto_build`` (our ``onnx.helper`` equivalents) against the public onnx API,
on the onnx conformance node cases and the light models; the fallback; a
user's ``onnx.ModelProto`` before and after ``import onnx``."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnx.inliner
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import LIGHT_DIR
from nnrt_core.frontends.onnx import onnx_lite, proto_build
from nnrt_core.frontends.onnx.onnx_lite import LiteOnnx, PublicOnnx, load_lite

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def lite() -> LiteOnnx:
    return load_lite()  # works in this process too: onnx is imported, the files load the same


@pytest.fixture(scope="module")
def public() -> PublicOnnx:
    return PublicOnnx()


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


def _verdict(fn, *args):
    try:
        fn(*args)
    except Exception as e:  # the message is part of the verdict
        return type(e).__name__, str(e)
    return "ok", ""


def test_lite_classes_are_onnx_classes(lite):
    assert lite.P.ModelProto is onnx.ModelProto and lite.P.TensorProto is onnx.TensorProto
    assert lite.P.IR_VERSION == onnx.IR_VERSION
    assert lite.ValidationError is onnx.checker.ValidationError
    assert lite.SchemaError is onnx.defs.SchemaError


def _broken(model: onnx.ModelProto, k: int) -> onnx.ModelProto:
    """A copy of ``model`` the checker should refuse, one of three ways."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    if k == 0:
        m.graph.node[0].op_type = "NoSuchOp"
    elif k == 1:
        m.graph.node[0].input.append("never_defined")
    else:
        del m.opset_import[:]
    return m


def test_checker_verdicts_and_messages_match_on_node_cases(lite, public, node_cases):
    refused = 0
    for i, case in enumerate(node_cases):
        models = [case.model, _broken(case.model, i % 3)]
        for m in models:
            got, want = _verdict(lite.check_model, m), _verdict(public.check_model, m)
            assert got == want, case.name
            refused += want[0] != "ok"
    assert refused >= len(node_cases) // 2  # the broken copies were refused


def test_shape_inference_matches_on_node_cases(lite, public, node_cases):
    for case in node_cases:
        for data_prop in (False, True):
            got = _verdict(lite.infer_shapes, case.model, False, data_prop)
            want = _verdict(public.infer_shapes, case.model, False, data_prop)
            assert got == want, case.name
            if got[0] == "ok":
                a = lite.infer_shapes(case.model, False, data_prop)
                b = public.infer_shapes(case.model, False, data_prop)
                assert a.SerializeToString(deterministic=True) == b.SerializeToString(deterministic=True), case.name
    errors = 0
    for case in node_cases[::5]:  # strict mode: the errors and their messages
        bad = onnx.ModelProto()
        bad.CopyFrom(case.model)
        for vi in bad.graph.input:  # strings where most ops take numbers: type errors
            vi.type.tensor_type.elem_type = TensorProto.STRING
        got, want = _verdict(lite.infer_shapes, bad, True, False), _verdict(public.infer_shapes, bad, True, False)
        assert got == want, case.name
        errors += want[0] != "ok"
    assert errors >= len(node_cases[::5]) // 3


def test_checker_and_shape_inference_match_on_light_models(lite, public):
    for m in _light_models():
        assert _verdict(lite.check_model, m, True) == _verdict(public.check_model, m, True)
        assert lite.infer_shapes(m, False, True).SerializeToString(deterministic=True) == \
            public.infer_shapes(m, False, True).SerializeToString(deterministic=True)


def test_schemas_match(lite, public):
    key = [(s.domain, s.name, s.since_version) for s in lite.get_all_schemas_with_history()]
    assert key == [(s.domain, s.name, s.since_version) for s in public.get_all_schemas_with_history()]
    assert lite.onnx_opset_version() == public.onnx_opset_version() == onnx.defs.onnx_opset_version()
    for domain, name, version in key[::7]:
        a, b = lite.get_schema(name, version + 1, domain), public.get_schema(name, version + 1, domain)
        assert (a.since_version, a.min_input, a.max_input, [p.type_str for p in a.inputs]) == \
            (b.since_version, b.min_input, b.max_input, [p.type_str for p in b.inputs])
        assert lite.has_schema(name, domain) and public.has_schema(name, domain)
    assert not lite.has_schema("NoSuchOp", "") and not public.has_schema("NoSuchOp", "")
    assert _verdict(lite.get_schema, "NoSuchOp", 13, "") == _verdict(public.get_schema, "NoSuchOp", 13, "")


def test_node_inference_matches(lite, public):
    schema = onnx.defs.get_schema("Reshape", 19, "")
    node = helper.make_node("Reshape", ["x", "s"], ["y"])
    types = {"x": helper.make_tensor_type_proto(TensorProto.FLOAT, [2, 3, 4]),
             "s": helper.make_tensor_type_proto(TensorProto.INT64, [2])}
    data = {"s": numpy_helper.from_array(np.array([6, -1], np.int64), "s")}
    got = lite.infer_node_outputs(schema, node, types, data, {"": 19})
    assert got == public.infer_node_outputs(schema, node, types, data, {"": 19})
    assert [d.dim_value for d in got["y"].tensor_type.shape.dim] == [6, 4]
    bad = {"x": types["x"], "s": helper.make_tensor_type_proto(TensorProto.FLOAT, [2])}
    assert _verdict(lite.infer_node_outputs, schema, node, bad, {}, {"": 19}) == \
        _verdict(public.infer_node_outputs, schema, node, bad, {}, {"": 19}) != ("ok", "")


def test_inliner_matches(lite, public):
    f = helper.make_function("local", "Twice", ["a"], ["b"], [helper.make_node("Add", ["a", "a"], ["b"])],
                             [helper.make_opsetid("", 17)])
    g = helper.make_graph([helper.make_node("Twice", ["x"], ["y"], domain="local")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
                          functions=[f])
    a, b = lite.inline_local_functions(m), public.inline_local_functions(m)
    assert a == b and [n.op_type for n in a.graph.node] == ["Add"] and not a.functions


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


def _python(code: str, **env: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **env}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


SESSION = """
import json, sys
import numpy as np
from nnrt_core import ScheduleConfig, Session
from nnrt_core.frontends.onnx import onnx_lite
sess = Session(%r, ScheduleConfig(backends=["onnxruntime"]))
out = sess.run({sess.inputs[0].name: np.ones((1, 3, 224, 224), np.float32)})
print(json.dumps({"lite": onnx_lite.is_lite(), "onnx": "onnx" in sys.modules,
                  "pool": "google.protobuf.descriptor_pool" in sys.modules,
                  "shape": list(next(iter(out.values())).shape)}))
"""


def test_fallback_forced_by_env_var_runs_the_same_session():
    pytest.importorskip("onnxruntime")
    path = str(LIGHT_DIR / "light_squeezenet.onnx")
    lite_run = _python(SESSION % path, **{onnx_lite.ENV_VAR: "1"})
    # the lite path makes the proto classes with upb's metaclass: protobuf's Python descriptor pool stays unloaded
    assert lite_run == {"lite": True, "onnx": False, "pool": False, "shape": [1, 1000, 1, 1]}
    assert _python(SESSION % path, **{onnx_lite.ENV_VAR: "0"}) == {"lite": False, "onnx": True, "pool": True,
                                                                 "shape": [1, 1000, 1, 1]}


USER_PROTO = """
import json, sys
import numpy as np
%s
from nnrt_core import ScheduleConfig, Session
from nnrt_core.frontends.onnx import onnx_lite
lite = onnx_lite.is_lite()
%s
from onnx import TensorProto, helper
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]),
                      opset_imports=[helper.make_opsetid("", 17)])
import onnx
sess = Session(m, ScheduleConfig(backends=["onnxruntime"]))
y = sess.run({"x": np.array([-1, 2], np.float32)})["y"]
same = onnx.ModelProto is onnx_lite.P.ModelProto and onnx.onnx_cpp2py_export is sys.modules["onnx.onnx_cpp2py_export"]
print(json.dumps({"lite": lite, "same": same, "y": y.tolist()}))
"""


def test_user_model_proto_works_after_and_before_import_onnx():
    pytest.importorskip("onnxruntime")
    warm = "Session(%r, ScheduleConfig(backends=['onnxruntime']))" % str(LIGHT_DIR / "light_squeezenet.onnx")
    # nnrt first (lite), onnx imported afterwards by the user
    default = {onnx_lite.ENV_VAR: "1"}
    assert _python(USER_PROTO % ("", warm), **default) == {"lite": True, "same": True, "y": [0.0, 2.0]}
    # onnx imported first: nnrt uses it (unless forced not to)
    assert _python(USER_PROTO % ("import onnx", ""), **default) == {"lite": False, "same": True, "y": [0.0, 2.0]}
    assert _python(USER_PROTO % ("import onnx", ""), **{onnx_lite.ENV_VAR: "force"}) == \
        {"lite": True, "same": True, "y": [0.0, 2.0]}
