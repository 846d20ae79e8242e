"""The ONNX Runtime backend's cold-start shortcuts (docs/plugins.md, "Cold
start"): the IR version cap read from a table for known releases (and the
table checked against a probe), probing for any other release; the export's
direct paths for plain attributes and arrays write what the general ones do."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("nnrt_onnxruntime")

from nnrt_core.errors import GraphError  # noqa: E402
from nnrt_core.frontends.onnx import proto_build  # noqa: E402
from nnrt_core.frontends.onnx.export import attribute_to_proto  # noqa: E402
from nnrt_core.frontends.onnx.onnx_api import P  # noqa: E402
from nnrt_core.ir import Attribute, AttrKind  # noqa: E402
from nnrt_onnxruntime import export  # noqa: E402


@pytest.fixture
def fresh_cap():
    """``max_ir_version`` recomputed in the test and forgotten after it."""
    export.max_ir_version.cache_clear()
    yield
    export.max_ir_version.cache_clear()


def test_the_table_agrees_with_a_probe_of_the_installed_release(fresh_cap):
    probed = export.probe_ir_version()
    assert 7 <= probed <= P.IR_VERSION
    assert export.max_ir_version() == probed  # from the table when listed, probed otherwise: the same answer


def test_a_listed_release_is_not_probed(fresh_cap, monkeypatch):
    monkeypatch.setattr(export, "ort_release", lambda: (1, 32))
    monkeypatch.setattr(export, "probe_ir_version", lambda: pytest.fail("a listed release was probed"))
    assert export.max_ir_version() == min(export.KNOWN_IR_VERSIONS[(1, 32)], P.IR_VERSION)


def test_an_unlisted_release_is_probed_once(fresh_cap, monkeypatch):
    calls = []
    monkeypatch.setattr(export, "ort_release", lambda: (9, 99))
    monkeypatch.setattr(export, "probe_ir_version", lambda: calls.append(1) or 9)
    assert export.max_ir_version() == 9
    assert export.max_ir_version() == 9
    assert calls == [1]


def test_the_table_never_exceeds_what_the_exporter_writes(fresh_cap, monkeypatch):
    monkeypatch.setattr(export, "KNOWN_IR_VERSIONS", {(1, 32): P.IR_VERSION + 5})
    monkeypatch.setattr(export, "ort_release", lambda: (1, 32))
    assert export.max_ir_version() == P.IR_VERSION


@pytest.mark.parametrize("version, want", [("1.32.0", (1, 32)), ("1.33.0.dev20260101", (1, 33)), ("2.x", (2,))])
def test_release_parsing(monkeypatch, version, want):
    monkeypatch.setattr(ort, "__version__", version)
    assert export.ort_release() == want


@pytest.mark.parametrize("arr", [np.arange(6, dtype=np.float32).reshape(2, 3), np.array(3, np.int64),
                                 np.zeros((0, 2), np.float16), np.array([True, False]),
                                 np.arange(6, dtype=np.float64).reshape(3, 2).T, np.array([1 + 2j], np.complex64),
                                 np.array(["a", "b"], dtype=object)])
@pytest.mark.parametrize("name", ["w", None])
def test_from_array_writes_what_onnx_writes(arr, name):
    ours = proto_build.from_array(arr, name)
    assert ours.SerializeToString() == onnx.numpy_helper.from_array(arr, name).SerializeToString()
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(ours), arr)


@pytest.mark.parametrize("kind, value", [(AttrKind.INT, 3), (AttrKind.INT, True), (AttrKind.INTS, [1, -2, 1 << 40]),
                                         (AttrKind.INTS, []), (AttrKind.FLOAT, 0.1),
                                         (AttrKind.FLOATS, [0.5, float("inf")]), (AttrKind.INTS, (1, 2)),
                                         (AttrKind.INTS, np.array([4, 5]))])
def test_plain_attributes_are_written_as_make_attribute_writes_them(kind, value):
    got = attribute_to_proto(Attribute("a", kind, value))
    want = proto_build.make_attribute("a", list(value) if kind == AttrKind.INTS else value, attr_type=int(kind))
    assert got.SerializeToString() == want.SerializeToString()


@pytest.mark.parametrize("kind, value", [(AttrKind.INT, 1 << 63), (AttrKind.INTS, [1, 1 << 64]),
                                         (AttrKind.FLOATS, [1.0, "x"]), (AttrKind.INT, "x"),
                                         (AttrKind.FLOAT, 2)])
def test_attributes_that_do_not_fit_are_graph_errors_naming_them(kind, value):
    with pytest.raises(GraphError, match="attribute 'a'"):
        attribute_to_proto(Attribute("a", kind, value))


def _snapshot(graph) -> tuple:
    """Everything of an IR graph a compile could change (ids included: the same objects)."""
    from nnrt_core.frontends.onnx import to_onnx

    return (to_onnx(graph).SerializeToString(), [id(n) for n in graph.nodes],
            [(id(v), v.type, id(v.const)) for n in graph.nodes for v in (*n.inputs, *n.outputs) if v is not None],
            {k: (id(v), v.const.tobytes()) for k, v in graph.initializers.items()})


@pytest.mark.parametrize("model", ["light_squeezenet.onnx", "sigmoid_pool"])
def test_compile_leaves_the_graph_as_it_was(light_dir, model):
    """``compiles_read_only``: the session hands a whole-graph partition over
    without a copy, so compile (export, exact kernels, session) must not change it."""
    from onnx import TensorProto, helper

    from nnrt_core import load_model
    from nnrt_core.backend import CompileOptions
    from nnrt_core.registry import Registry

    if model == "sigmoid_pool":  # the nodes precise_kernels rewrites (in the exported proto only)
        g = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["s"], name="sig"),
                               helper.make_node("GlobalAveragePool", ["s"], ["y"], name="gap")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 1, 1])])
        source = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    else:
        source = str(light_dir / model)
    backend = Registry().backend("onnxruntime").backend
    assert type(backend).compiles_read_only
    graph = load_model(source).graph
    before = _snapshot(graph)
    part = backend.compile(graph, CompileOptions())
    assert _snapshot(graph) == before
    x = np.random.default_rng(0).standard_normal([d if isinstance(d, int) else 1 for d in graph.inputs[0].shape])
    out = part.run({graph.inputs[0].name: x.astype(np.float32)})
    raw = ort.InferenceSession(onnx.load(source).SerializeToString() if isinstance(source, str)
                               else source.SerializeToString(), providers=["CPUExecutionProvider"])
    want = raw.run(None, {graph.inputs[0].name: x.astype(np.float32)})[0]
    np.testing.assert_allclose(next(iter(out.values())), want, rtol=1e-5, atol=1e-6)
    assert _snapshot(graph) == before
